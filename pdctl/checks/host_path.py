"""The judge of a host's state_dir path (issue 28, S4, second re-pass): the walk that
pdctl.services.state_dir_guard runs on the host prints one line per component it meets, and this says whether pdctl
may write and remove files under that path there. Pure: parsing and judging only.

On the host pdctl's writes are shell commands and put_file, which look the path up afresh each time: no directory
is held open as pdctl.safe_path holds one here. So every component on the way (a directory or a link) must be one no
other user can swap between the check and the writes (pdctl.checks.path_trust.swap_refusal: in a private directory,
or the euid's or root's own in a sticky one such as /tmp), and the state_dir reached must itself be private (pdctl
makes files there by name: a name another user may create first is a plant)."""

from __future__ import annotations

import stat
from dataclasses import dataclass

from pdctl.checks.path_trust import Entry, swap_refusal, untrusted_dir

_TYPES = {"d": stat.S_IFDIR, "l": stat.S_IFLNK, "-": stat.S_IFREG, "p": stat.S_IFIFO, "s": stat.S_IFSOCK}
_TYPES.update({"c": stat.S_IFCHR, "b": stat.S_IFBLK})


def mode_from_ls(text: str) -> int:
    """The st_mode an `ls -l` mode column says ("drwxrwxrwt", "-rw-r--r--+", "lrwxrwxrwx"). Raises ValueError."""
    if len(text) < 10 or text[0] not in _TYPES:
        raise ValueError(f"not an ls mode: {text!r}")
    mode = _TYPES[text[0]]
    for i, (ch, bit) in enumerate(zip(text[1:10], (0o400, 0o200, 0o100, 0o40, 0o20, 0o10, 0o4, 0o2, 0o1))):
        special = (stat.S_ISUID, stat.S_ISGID, stat.S_ISVTX)[i // 3] if i % 3 == 2 else 0
        if ch in "rwxst":
            mode |= bit
        if ch in "sStT" and special:
            mode |= special
        elif ch not in "rwx-sStT":
            raise ValueError(f"not an ls mode: {text!r}")
    return mode


@dataclass(frozen=True)
class Walk:
    """What the walk printed: the host's euid, each component met (path -> its entry and the directory holding
    it, "" for /), in order; `missing` (the first component that does not exist: its path, and what of the path
    was left after it) or `broken` (why the walk stopped: not a directory, a loop, a component gone meanwhile);
    `final`: the directory the path leads to (when the walk reached its end)."""

    euid: int
    entries: tuple[tuple[str, Entry, str], ...]
    missing: tuple[str, str] | None = None
    broken: str | None = None
    final: str | None = None


def parse_walk(text: str) -> Walk:
    """Parse the walk's output (tab-separated lines: EUID, E, MISSING, NOTDIR, LOOP, GONE, END). Raises ValueError
    for output that is not a whole walk."""
    euid: int | None = None
    entries: list[tuple[str, Entry, str]] = []
    missing = broken = final = None
    for line in text.splitlines():
        f = line.split("\t")
        if f[0] == "EUID" and len(f) == 2:
            euid = int(f[1])
        elif f[0] == "E" and len(f) == 6:
            entries.append((f[5], Entry(mode_from_ls(f[1]), int(f[2]), int(f[3])), f[4]))
        elif f[0] == "MISSING" and len(f) == 3:
            missing = (f[1], f[2])
        elif f[0] in ("NOTDIR", "LOOP", "GONE") and len(f) == 2:
            broken = {"NOTDIR": "{} is not a directory", "LOOP": "too many symbolic links at {}"}.get(
                f[0], "{} changed while it was looked at"
            ).format(f[1])
        elif f[0] == "END" and len(f) == 2:
            final = f[1]
    if euid is None or not entries or (missing is None and broken is None and final is None):
        raise ValueError("the walk did not finish")
    return Walk(euid, tuple(entries), missing, broken, final)


def judge_walk(w: Walk) -> str | None:
    """Why pdctl may not write under the walked path (words that follow the path's name), None when it may.
    A missing component is not judged here (the guard makes it, then walks again)."""
    seen = {path: e for path, e, _ in w.entries}
    for path, e, holder in w.entries:
        if not holder:
            continue  # / itself
        why = swap_refusal(e, seen[holder], w.euid)
        if why is not None:
            if e.is_link:
                return (
                    f"goes through {path}, a symbolic link of uid {e.uid} in the directory {holder} {why}: pdctl "
                    "follows no link another user may have planted there"
                )
            return (
                f"goes through {path}, a directory of uid {e.uid} in the directory {holder} {why}: another user "
                "could swap it for a link"
            )
    if w.broken is not None:
        return f"cannot be walked: {w.broken}"
    if w.final is not None:
        why = untrusted_dir(seen[w.final], w.euid)
        if why is not None:
            return f"leads to the directory {w.final} {why}: pdctl makes files there by name"
    return None
