"""Opening and writing every file pdctl writes where a user names it or another user can reach it (the watch's
--timeline, the audit log, --report, known_hosts, pdctl's state files), so that a path planted by someone else
cannot turn pdctl's writes against another file:
- the last component is never followed nor replaced when it is a symbolic link (O_NOFOLLOW: pdctl makes no
  links, so one there is someone else's); a link higher up the path is followed only when it is the euid's or
  root's or sits in a private directory (pdctl.safe_path, pdctl.checks.path_trust), the directory reached must not
  belong to another non-root user, and the file is opened, made and renamed relative to that directory (no swap
  between look and write);
- a file with other hard links, or owned by another user in a world-writable sticky directory (/tmp: the
  kernel's protected_regular rule), is refused;
- a device, directory or socket is never opened (writing to /dev/full fails for ever, a tty is no log), a FIFO
  only when the caller allows it, and never blocking on it;
- a file created is private (0600, as the audit log) unless the caller asks for another mode.
`open_append` opens a file to append to; `write_whole` replaces a file whole (a report, a state file): a new file
made in the same directory (O_EXCL|O_NOFOLLOW) renamed over the target, so nothing is ever written through a link
and a reader sees the old content or the new; `check_whole` asks before a long command whether that write would be
refused. Every refusal is one line naming the file, raised as the caller's UsageError class (exit 2)."""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from pdctl.errors import UsageError
from pdctl.safe_path import Parent, open_parent
from pdctl.safe_read import file_kind

PRIVATE = 0o600
READABLE = 0o644  # a report, meant to be passed around (the umask still applies)


class NoReader(Exception):
    """A FIFO with no reader yet (opening it for writing without blocking says ENXIO): try again later."""


def open_append(
    path: str | os.PathLike, error: type[UsageError], what: str, *, fifo: bool = False, readable: bool = False
) -> int:
    """An fd open for appending at `path` (created 0600 if missing; the caller closes it), also open for reading
    with `readable` (a regular file only). A regular file's fd blocks as usual; a FIFO's (only with `fifo`) stays
    non-blocking, so a reader that does not read can never stall the writer. Raises NoReader for a FIFO nobody
    reads yet, `error` naming the file for every refusal (a symbolic link, another hard link, another user's file
    in a sticky world-writable directory, a directory, a device, a socket, a FIFO without `fifo`, another user's
    link on the way in a sticky world-writable directory) and for what the system refuses (no permission, no
    directory)."""
    p = Path(path)
    with open_parent(p, error, what) as parent:
        return _open_append(p, parent, error, what, fifo=fifo and not readable, readable=readable)


def _open_append(p: Path, parent: Parent, error: type[UsageError], what: str, *, fifo: bool, readable: bool) -> int:
    before = _lstat(p, parent, error, what)
    if before is not None:
        _check_kind(p, before, error, what, fifo)  # before opening: opening a device can itself do something
    access = os.O_RDWR if readable else os.O_WRONLY
    flags = access | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(parent.name, flags, PRIVATE, dir_fd=parent.fd)
    except OSError as e:
        if e.errno == errno.ENXIO and fifo:
            raise NoReader(f"{what} {p}: a FIFO nobody reads yet") from None
        if e.errno == errno.ELOOP:  # it became a link after the lstat
            raise error(_link_refusal(p, what)) from None
        raise error(_cannot(p, what, e)) from None
    try:
        st = os.fstat(fd)
        _check_kind(p, st, error, what, fifo)
        _check_planted(p, st, parent, error, what)
        if stat.S_ISREG(st.st_mode):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_whole(
    path: str | os.PathLike, data: str | bytes, error: type[UsageError], what: str, *, mode: int = PRIVATE
) -> None:
    """Replace the file at `path` with `data` (str as UTF-8), whole or not at all: `data` goes to a new file in the
    same directory (a random name opened O_CREAT|O_EXCL|O_NOFOLLOW, `mode` less the umask), then renamed over
    `path`. Nothing is written through a link, and a reader sees the old content or the new, never a part.
    Raises `error` naming the file, nothing written or replaced, when what is at `path` is refused (as
    `check_whole` says: looked at before writing and again just before the rename) or the write fails (a full
    disk, no permission, no directory, another user's link on the way in a sticky world-writable directory); the
    temporary file is removed then."""
    p = Path(path)
    with open_parent(p, error, what) as parent:
        _check_existing(p, parent, error, what)
        fd, tmp = _new_temp(p, parent, error, what, mode)
        try:
            try:
                view = memoryview(data.encode() if isinstance(data, str) else data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            _check_existing(p, parent, error, what)  # what is there now: the rename replaces it, whatever it became
            os.replace(tmp, parent.name, src_dir_fd=parent.fd, dst_dir_fd=parent.fd)
        except OSError as e:
            _remove(tmp, parent)
            raise error(_cannot(p, what, e)) from None
        except BaseException:
            _remove(tmp, parent)
            raise


def check_whole(path: str | os.PathLike, error: type[UsageError], what: str) -> None:
    """Raise `error` naming the file unless `write_whole(path, ...)` could write it now: what is at `path` is
    refused as write_whole refuses it (a symbolic link, another hard link, another user's file in a sticky
    world-writable directory, anything but a regular file, another user's link on the way in a sticky
    world-writable directory), and a temporary file must be possible in its directory (made and removed at once).
    Leaves nothing behind; changes nothing."""
    p = Path(path)
    with open_parent(p, error, what) as parent:
        _check_existing(p, parent, error, what)
        fd, tmp = _new_temp(p, parent, error, what, PRIVATE)
        os.close(fd)
        _remove(tmp, parent)


def is_fifo(fd: int) -> bool:
    return stat.S_ISFIFO(os.fstat(fd).st_mode)


def _lstat(p: Path, parent: Parent, error: type[UsageError], what: str) -> os.stat_result | None:
    """What is at `p` itself (a link is not followed), None when nothing is."""
    try:
        return os.stat(parent.name, dir_fd=parent.fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise error(_cannot(p, what, e)) from None


def _check_existing(p: Path, parent: Parent, error: type[UsageError], what: str) -> None:
    """Refuse what is at `p` for a whole-file write: anything but a regular file, or one planted there."""
    st = _lstat(p, parent, error, what)
    if st is not None:
        _check_kind(p, st, error, what, fifo=False)
        _check_planted(p, st, parent, error, what)


def _new_temp(p: Path, parent: Parent, error: type[UsageError], what: str, mode: int) -> tuple[int, str]:
    """A new file beside `p` (in `parent`) under a random name (never one that was there: O_EXCL, no link
    followed), open for writing; returns the fd and the name. A fixed short name, not `p`'s: a long file name must
    not become too long for the directory."""
    for _ in range(8):
        tmp = f".pdctl-{secrets.token_hex(6)}.tmp"
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
            return os.open(tmp, flags, mode, dir_fd=parent.fd), tmp
        except FileExistsError:
            continue  # someone's file under that name: another name
        except OSError as e:
            raise error(_cannot(p, what, e)) from None
    raise error(f"{what} {p}: cannot be written (no free temporary name in {parent.where})")


def _remove(tmp: str, parent: Parent) -> None:
    try:
        os.unlink(tmp, dir_fd=parent.fd)
    except OSError:
        pass


def _check_kind(p: Path, st: os.stat_result, error: type[UsageError], what: str, fifo: bool) -> None:
    mode = st.st_mode
    if stat.S_ISREG(mode) or (fifo and stat.S_ISFIFO(mode)):
        return
    if stat.S_ISLNK(mode):
        raise error(_link_refusal(p, what))
    allowed = "a regular file or a FIFO" if fifo else "a regular file"
    raise error(f"{what} {p}: is {file_kind(mode)}, not {allowed}")


def _check_planted(p: Path, st: os.stat_result, parent: Parent, error: type[UsageError], what: str) -> None:
    """Refuse a file that someone else may have put there for pdctl to write into."""
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise error(f"{what} {p}: has {st.st_nlink - 1} other hard link(s); pdctl does not write into a linked file")
    if st.st_uid == os.geteuid():
        return
    d = os.fstat(parent.fd)  # the directory the file is in, as reached: not p.parent looked up again
    sticky_shared = d.st_mode & stat.S_ISVTX and d.st_mode & stat.S_IWOTH
    if sticky_shared and d.st_uid != st.st_uid:
        raise error(
            f"{what} {p}: belongs to uid {st.st_uid} in the world-writable directory {parent.where}; "
            "pdctl does not write to a file another user may have planted there"
        )


def _link_refusal(p: Path, what: str) -> str:
    return (
        f"{what} {p}: is a symbolic link; pdctl neither writes through nor replaces a link it did not make: "
        "give the file itself"
    )


def _cannot(p: Path, what: str, e: OSError) -> str:
    return f"{what} {p}: cannot be written ({e.strerror or e})"
