"""Opening a file pdctl appends to (the watch's --timeline; the audit log and a --report may use it too) so that a
path planted by someone else cannot turn pdctl's writes against another file: the last component is never followed
when it is a symbolic link (O_NOFOLLOW: pdctl makes no links, so one there is someone else's), a file with other hard
links or owned by another user in a world-writable sticky directory (/tmp: the kernel's protected_regular rule) is
refused, a device, directory or socket is never opened (writing to /dev/full fails for ever, a tty is no log), a
FIFO only when the caller allows it, and never blocking on it; a file created is private (0600, as the audit log).
Every refusal is one line naming the file, raised as the caller's UsageError class (exit 2)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from pdctl.errors import UsageError

PRIVATE = 0o600


class NoReader(Exception):
    """A FIFO with no reader yet (opening it for writing without blocking says ENXIO): try again later."""


def open_append(path: str | os.PathLike, error: type[UsageError], what: str, *, fifo: bool = False) -> int:
    """An fd open for appending at `path` (created 0600 if missing; the caller closes it). A regular file's fd
    blocks as usual; a FIFO's (only with `fifo`) stays non-blocking, so a reader that does not read can never
    stall the writer. Raises NoReader for a FIFO nobody reads yet, `error` naming the file for every refusal
    (a symbolic link, another hard link, another user's file in a sticky world-writable directory, a directory,
    a device, a socket, a FIFO without `fifo`) and for what the system refuses (no permission, no directory)."""
    p = Path(path)
    try:
        before: os.stat_result | None = os.lstat(p)
    except FileNotFoundError:
        before = None  # created below
    except OSError as e:
        raise error(f"{what} {p}: cannot be written ({e.strerror or e})") from None
    if before is not None:
        _check_kind(p, before, error, what, fifo)  # before opening: opening a device can itself do something
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(p, flags, PRIVATE)
    except OSError as e:
        if e.errno == errno.ENXIO and fifo:
            raise NoReader(f"{what} {p}: a FIFO nobody reads yet") from None
        if e.errno == errno.ELOOP:  # it became a link after the lstat
            raise error(_link_refusal(p, what)) from None
        raise error(f"{what} {p}: cannot be written ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        _check_kind(p, st, error, what, fifo)
        _check_planted(p, st, error, what)
        if stat.S_ISREG(st.st_mode):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def is_fifo(fd: int) -> bool:
    return stat.S_ISFIFO(os.fstat(fd).st_mode)


def _check_kind(p: Path, st: os.stat_result, error: type[UsageError], what: str, fifo: bool) -> None:
    mode = st.st_mode
    if stat.S_ISREG(mode) or (fifo and stat.S_ISFIFO(mode)):
        return
    if stat.S_ISLNK(mode):
        raise error(_link_refusal(p, what))
    kind = (
        "a directory"
        if stat.S_ISDIR(mode)
        else "a FIFO (named pipe)"
        if stat.S_ISFIFO(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a regular file"
    )
    allowed = "a regular file or a FIFO" if fifo else "a regular file"
    raise error(f"{what} {p}: is {kind}; pdctl appends only to {allowed}")


def _check_planted(p: Path, st: os.stat_result, error: type[UsageError], what: str) -> None:
    """Refuse a file that someone else may have put there for pdctl to write into."""
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise error(f"{what} {p}: has {st.st_nlink - 1} other hard link(s); pdctl does not write into a linked file")
    if st.st_uid == os.geteuid():
        return
    try:
        d = os.stat(p.parent)
    except OSError:
        return
    sticky_shared = d.st_mode & stat.S_ISVTX and d.st_mode & stat.S_IWOTH
    if sticky_shared and d.st_uid != st.st_uid:
        raise error(
            f"{what} {p}: belongs to uid {st.st_uid} in the world-writable directory {p.parent}; "
            "pdctl does not append to a file another user may have planted there"
        )


def _link_refusal(p: Path, what: str) -> str:
    return f"{what} {p}: is a symbolic link; pdctl does not write through a link it did not make: give the file itself"
