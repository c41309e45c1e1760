"""Reaching the directory a file pdctl writes goes in, without following a symbolic link someone else planted on
the way there (issue 28, S4: `$S/pdir -> victimdir`, planted by another user in a 1777 directory, made root append
to `victimdir/tl.jsonl`).

The path is made absolute (not resolved) and walked from / one component at a time, each directory held open
(O_PATH) and the next one opened relative to it without following a link, so the directory checked is the
directory written into: nothing can be swapped between the look and the write. A link met on the way is followed
(its target walked the same way, from / or from the link's own directory) only when pdctl.checks.path_trust says
so, whatever fs.protected_symlinks says (it is off on many machines, and it looks at sticky directories only): a
link of the euid or of root, or one in a private directory (the euid's or root's, and no other user may write into
it). A link of another user in their own directory (a non-sticky 0777 directory of nobody's in /tmp, issue 28 S4
second re-pass; or even their 0755 home) is refused: they may have planted it. The operator's links (/var/run ->
/run, a dotfile directory linked in a home) are followed. The last component is not walked: the caller opens it
relative to the directory, never following it; that directory must not belong to another non-root user (who may
replace what pdctl writes there)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from pdctl.checks.path_trust import Entry, link_refusal, untrusted_dir, write_into_refusal
from pdctl.errors import UsageError

MAX_LINKS = 40  # the kernel's own limit on the links followed in one lookup (ELOOP past it)
_DIR = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
_ANY = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC  # a link is opened as itself, not followed


class Parent:
    """The directory that holds a path's last component, open: `fd` (O_PATH, for the *at calls and fstat),
    `name` (the last component, "." when the path names a directory itself, such as "/") and `where` (the
    directory's path as walked, every link replaced by what it led to). A context manager: leaving it closes fd."""

    def __init__(self, fd: int, name: str, where: str) -> None:
        self.fd, self.name, self.where = fd, name, where

    def __enter__(self) -> Parent:
        return self

    def __exit__(self, *_: object) -> None:
        os.close(self.fd)


def open_parent(path: str | os.PathLike, error: type[UsageError], what: str) -> Parent:
    """The directory holding `path`'s last component, reached as the module says (the caller closes it, or uses
    it in a `with`). Raises `error` naming `path` when a link on the way is refused (which link, in which
    directory, whose), when the directory reached belongs to another non-root user, when a component is missing or
    not a directory, for too many links, or for what the system refuses (no search permission)."""
    p = Path(path)
    try:
        parts = (p if p.is_absolute() else Path(os.getcwd(), p)).parts[1:]  # absolute (from the real cwd), unresolved
    except OSError as e:  # the cwd was removed
        raise error(_cannot(p, what, e)) from None
    name = parts[-1] if parts and parts[-1] != ".." else "."
    todo = list(reversed(parts[:-1] if name != "." else parts))
    fd, where, links = os.open("/", _DIR), "/", 0
    try:
        while todo:
            part = todo.pop()
            if part in ("", "."):
                continue
            here = os.path.dirname(where) if part == ".." else os.path.join(where, part)
            nxt = os.open(part, _ANY, dir_fd=fd)
            try:
                st = os.fstat(nxt)
                if stat.S_ISLNK(st.st_mode):
                    links += 1
                    if links > MAX_LINKS:
                        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
                    _check_link(p, here, st, os.fstat(fd), where, error, what)
                    target = os.readlink("", dir_fd=nxt)  # the link opened, not its name: the one checked
                elif not stat.S_ISDIR(st.st_mode):
                    raise OSError(errno.ENOTDIR, f"{here} is not a directory")
            except BaseException:
                os.close(nxt)
                raise
            if stat.S_ISLNK(st.st_mode):
                os.close(nxt)
                if target.startswith("/"):
                    os.close(fd)
                    fd, where = os.open("/", _DIR), "/"
                todo.extend(reversed(target.split("/")))
            else:
                os.close(fd)
                fd, where = nxt, here
        why = write_into_refusal(_entry(os.fstat(fd)), os.geteuid())
        if why is not None and name != ".":  # a directory named itself is refused as one by the writers
            raise error(f"{what} {p}: the directory {where} {why}; give a path in a directory of your own")
    except OSError as e:
        os.close(fd)
        raise error(_cannot(p, what, e)) from None
    except BaseException:
        os.close(fd)
        raise
    return Parent(fd, name, where)


def _check_link(
    p: Path, link: str, st: os.stat_result, d: os.stat_result, where: str, error: type[UsageError], what: str
) -> None:
    """Refuse the link at `link` (its lstat `st`, in the directory `where` whose stat is `d`) unless
    pdctl.checks.path_trust follows it: the euid's or root's link, or one in a private directory."""
    euid = os.geteuid()
    if link_refusal(_entry(st), _entry(d), euid) is None:
        return
    raise error(
        f"{what} {p}: goes through {link}, a symbolic link of uid {st.st_uid} in {_dir_words(d, where, euid)}; "
        "pdctl follows no link another user may have planted there: give a path without it"
    )


def _dir_words(d: os.stat_result, where: str, euid: int) -> str:
    if d.st_mode & stat.S_ISVTX and d.st_mode & stat.S_IWOTH and d.st_uid in (euid, 0):
        return f"the world-writable sticky directory {where}"  # /tmp's case, in the words everyone knows
    return f"the directory {where} {untrusted_dir(_entry(d), euid)}"


def _entry(st: os.stat_result) -> Entry:
    return Entry(st.st_mode, st.st_uid, st.st_gid)


def _cannot(p: Path, what: str, e: OSError) -> str:
    return f"{what} {p}: cannot be written ({e.strerror or e})"
