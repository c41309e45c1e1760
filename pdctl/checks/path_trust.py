"""Whom a path pdctl writes under can be turned by (issue 28, S4): the judges shared by pdctl.safe_path (files on
this machine, reached through held directory fds) and pdctl.services.state_dir_guard (a host's state_dir, reached
through shell commands that look the path up again each time). Pure functions of numbers: modes, uids, gids.

The rule: a directory is *private* when it belongs to the euid or to root and no other user may write into it (no
o+w; no g+w for a group other than root's). A symbolic link is followed only when it belongs to the euid or root,
or sits in a private directory: anywhere else another user may have planted it (a non-sticky 0777 directory of
another user inside /tmp was enough). A link of another user in their own directory, even one only they may write
(0755), is refused too: the owner of a directory can change it whenever they like (chmod), and a link they made
there that leads to root's files is exactly the plant. pdctl writes no file into a directory of another non-root
user (they may replace or swap it at any time)."""

from __future__ import annotations

import stat
from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    """What an lstat says of one path component: its mode (type and permission bits), owner and group."""

    mode: int
    uid: int
    gid: int

    @property
    def is_link(self) -> bool:
        return stat.S_ISLNK(self.mode)

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def sticky(self) -> bool:
        return bool(self.mode & stat.S_ISVTX)


def trusted(uid: int, euid: int) -> bool:
    """The euid and root are the only owners pdctl trusts."""
    return uid in (euid, 0)


def shared_with(d: Entry) -> str | None:
    """Who else may write into directory `d` by its mode, in words; None when only its owner (and root) may."""
    if d.mode & stat.S_IWOTH:
        return "every user"
    if d.mode & stat.S_IWGRP and d.gid != 0:
        return f"group {d.gid}"
    return None


def untrusted_dir(d: Entry, euid: int) -> str | None:
    """Why directory `d` is not private (its owner is another user, or others may write into it), in words that
    follow "a directory ..."; None when it is private."""
    if not trusted(d.uid, euid):
        return f"of uid {d.uid}"
    others = shared_with(d)
    if others is None:
        return None
    sticky = "sticky " if d.sticky else ""
    return f"({sticky}mode {stat.S_IMODE(d.mode):04o}) that {others} may write into"


def link_refusal(link: Entry, d: Entry, euid: int) -> str | None:
    """Why a link of `link`'s owner in directory `d` is not followed (words about `d`), None when it is: it
    belongs to the euid or root, or `d` is private."""
    if trusted(link.uid, euid):
        return None
    return untrusted_dir(d, euid)


def write_into_refusal(d: Entry, euid: int) -> str | None:
    """Why pdctl writes no file into directory `d`, None when it may: `d` belongs to another non-root user, who
    may replace what pdctl writes there (a directory others may write into is judged by its files instead: the
    sticky bit and the file checks of pdctl.safe_write)."""
    return None if trusted(d.uid, euid) else f"belongs to uid {d.uid}, who may replace what pdctl writes there"


def swap_refusal(entry: Entry, d: Entry, euid: int) -> str | None:
    """Why `entry` (a directory or link on a path) in directory `d` could be swapped by another user between a look
    and a later lookup of the same path (a host's shell commands look a path up afresh each time), None when it
    cannot: `d` is private, or `d` is sticky, trusted, and `entry` belongs to the euid or root (only they may
    rename or remove it there)."""
    if not trusted(d.uid, euid):
        return f"of uid {d.uid}"
    if shared_with(d) is None or (d.sticky and trusted(entry.uid, euid)):
        return None
    return untrusted_dir(d, euid)
