"""A symbolic link on the way to a file pdctl writes (issue 28, S4 re-pass): `$S/pdir -> victimdir`, planted by
another user (nobody) in a world-writable sticky directory, made `pdctl watch --once --timeline $S/pdir/tl.jsonl`
run as root append 17 lines to root's `victimdir/tl.jsonl`. pdctl.safe_path follows a link on the way as the
kernel's fs.protected_symlinks would (off on this machine): another user's link in a sticky world-writable directory
is refused, for every writer (append and whole-file), naming the path and the link, exit 2; the operator's own
links, the directory owner's, and links in directories nobody else may write stay followed. Real directories and
links under tmp_path (the link given to nobody with os.lchown, so the tests run as root); one real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from pdctl.errors import UsageError
from pdctl.safe_path import open_parent
from pdctl.safe_write import check_whole, open_append, write_whole

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
FOREIGN = r"goes through {link}, a symbolic link of uid 65534 in the world-writable sticky directory {where}; "

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a link to another user")


@pytest.fixture
def s(tmp_path):
    """$S (1777, root's, like /tmp) holding `pdir`, nobody's link to $T/victimdir, which holds root's tl.jsonl."""
    shared = tmp_path / "S"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    victimdir = tmp_path / "T" / "victimdir"
    victimdir.mkdir(parents=True)
    (victimdir / "tl.jsonl").write_text("keep\n")
    pdir = shared / "pdir"
    pdir.symlink_to(victimdir)
    os.lchown(pdir, NOBODY, NOBODY)
    return SimpleNamespace(tmp=tmp_path, shared=shared, victimdir=victimdir, pdir=pdir)


def _untouched(s) -> None:
    assert (s.victimdir / "tl.jsonl").read_text() == "keep\n"
    assert sorted(p.name for p in s.victimdir.iterdir()) == ["tl.jsonl"]  # nothing made there, no temporary left


def _append(path, data=b"x\n"):
    fd = open_append(path, UsageError, "--timeline", fifo=True)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _foreign(link, where) -> str:
    return "^--timeline .*: " + FOREIGN.format(link=link, where=where) + "pdctl follows no link"


def test_another_users_link_in_a_sticky_directory_is_refused_for_an_existing_and_a_new_file(s):
    """The reproduction, in the library: the file under the link exists (appended to before) or not (made)."""
    for name in ("tl.jsonl", "new.jsonl"):
        with pytest.raises(UsageError, match=_foreign(s.pdir, s.shared)) as ei:
            _append(s.pdir / name)
        assert ei.value.exit_code == 2
    _untouched(s)


def test_the_whole_file_writers_refuse_it_too(s):
    for attempt in (
        lambda: write_whole(s.pdir / "tl.jsonl", "x", UsageError, "--timeline"),
        lambda: write_whole(s.pdir / "r.html", "x", UsageError, "--timeline"),
        lambda: check_whole(s.pdir / "r.html", UsageError, "--timeline"),
    ):
        with pytest.raises(UsageError, match=_foreign(s.pdir, s.shared)):
            attempt()
    _untouched(s)


def test_the_operators_own_link_and_roots_are_followed_in_a_sticky_directory(s):
    """A link of the euid, or of root (here the same), is followed in /tmp's kind of directory."""
    mine = s.shared / "mine"
    mine.symlink_to(s.victimdir)
    _append(mine / "tl.jsonl")
    assert (s.victimdir / "tl.jsonl").read_text() == "keep\nx\n"


def test_a_link_of_the_sticky_directorys_own_other_owner_is_refused(s):
    """The kernel follows a link of the sticky directory's owner; pdctl does not when that owner is another user
    (issue 28 S4, second re-pass): a directory of another user is theirs to plant in."""
    theirs_dir = s.tmp / "S2"  # nobody's own sticky 1777 directory holding nobody's link
    theirs_dir.mkdir()
    os.chmod(theirs_dir, 0o1777)
    os.chown(theirs_dir, NOBODY, NOBODY)
    link = theirs_dir / "pdir"
    link.symlink_to(s.victimdir)
    os.lchown(link, NOBODY, NOBODY)
    with pytest.raises(UsageError, match=rf"goes through {link}, a symbolic link of uid 65534 in the directory "):
        write_whole(link / "r.html", "report", UsageError, "--report")
    _untouched(s)


def test_a_link_of_another_user_outside_a_shared_directory_is_followed(s):
    """Like /var/run -> /run or a home's dotfile directory link: a directory nobody else may write into."""
    private = s.tmp / "home"
    private.mkdir(mode=0o755)
    link = private / ".logs"
    link.symlink_to(s.victimdir)
    os.lchown(link, NOBODY, NOBODY)
    _append(link / "tl.jsonl")
    assert (s.victimdir / "tl.jsonl").read_text() == "keep\nx\n"
    sticky_only = s.tmp / "sticky-not-shared"  # sticky but not world-writable: not /tmp's case
    sticky_only.mkdir()
    os.chmod(sticky_only, 0o1755)
    (sticky_only / "l").symlink_to(s.victimdir)
    os.lchown(sticky_only / "l", NOBODY, NOBODY)
    _append(sticky_only / "l" / "tl.jsonl")
    assert (s.victimdir / "tl.jsonl").read_text() == "keep\nx\nx\n"


def test_the_foreign_link_deeper_in_a_chain_is_found(s, monkeypatch):
    """Two levels: the operator's own link leading to the foreign one, as a directory on the way (logs -> $S,
    then pdir) and as a link's target (mine -> pdir); a relative path and `..` walked as the kernel walks them."""
    home = s.tmp / "home"
    home.mkdir()
    (home / "logs").symlink_to(s.shared)
    (s.shared / "mine").symlink_to("pdir")  # relative, to nobody's link beside it
    (s.shared / "up").symlink_to(s.victimdir / "sub")  # `up/..` is victimdir (the link's target's parent)
    (s.victimdir / "sub").mkdir()
    cases = [home / "logs" / "pdir" / "tl.jsonl", s.shared / "mine" / "tl.jsonl", s.shared / "mine" / "." / "x"]
    for path in cases:
        with pytest.raises(UsageError, match=_foreign(s.pdir, s.shared)):
            _append(path)
    monkeypatch.chdir(home)
    with pytest.raises(UsageError, match=_foreign(s.pdir, s.shared)):
        write_whole("logs/pdir/r.html", "x", UsageError, "--timeline")
    (s.victimdir / "sub").rmdir()
    _untouched(s)
    (s.victimdir / "sub").mkdir()
    with open_parent(s.shared / "up" / ".." / "tl.jsonl", UsageError, "--timeline") as parent:
        assert (parent.where, parent.name) == (str(s.victimdir), "tl.jsonl")  # not $S/tl.jsonl
    with open_parent(home / "logs" / "mine", UsageError, "--timeline") as parent:
        assert (parent.where, parent.name) == (str(s.shared), "mine")  # the last component is the caller's


@pytest.mark.parametrize("writer", ["append", "whole"])
def test_a_directory_swapped_for_a_link_after_the_walk_is_not_written_through(s, monkeypatch, writer):
    """A real directory in $S when walked (the test's own: pdctl writes into no directory of another user),
    nobody's link to victimdir when written: the write goes to the directory walked (held open), never where the
    new link points."""
    from pdctl import safe_write

    d = s.shared / "d"
    d.mkdir()
    looked = safe_write._lstat

    def swap_then_look(p, parent, error, what):
        if d.is_dir() and not d.is_symlink():
            d.rename(s.shared / "d-moved")
            d.symlink_to(s.victimdir)
            os.lchown(d, NOBODY, NOBODY)
        return looked(p, parent, error, what)

    monkeypatch.setattr(safe_write, "_lstat", swap_then_look)
    if writer == "append":
        _append(d / "tl.jsonl")
    else:
        write_whole(d / "tl.jsonl", "x\n", UsageError, "--report")
    assert d.is_symlink() and (s.shared / "d-moved" / "tl.jsonl").read_text() == "x\n"
    _untouched(s)


def test_a_missing_directory_a_file_on_the_way_and_a_loop_are_named(s):
    with pytest.raises(UsageError, match=r"^--timeline .*/nope/t: cannot be written \(No such file"):
        _append(s.tmp / "nope" / "t")
    (s.tmp / "f").write_text("")
    with pytest.raises(UsageError, match=r"cannot be written \(.*/f is not a directory\)"):
        _append(s.tmp / "f" / "t")
    (s.tmp / "loop").symlink_to("loop")
    with pytest.raises(UsageError, match=r"loop/t: cannot be written \(Too many levels of symbolic links\)"):
        _append(s.tmp / "loop" / "t")
    with pytest.raises(UsageError, match=r"^--timeline /: is a directory"):
        _append("/")


def test_pdctl_watch_once_refuses_the_planted_timeline_with_exit_2_and_appends_nothing(s):
    """The red team's command, a real process: 17 lines went to root's file."""
    env = {k: v for k, v in os.environ.items() if k not in ("PDCTL_INVENTORY", "PDCTL_AUDIT_LOG")}
    env.update(XDG_STATE_HOME=str(s.tmp / "state"), COLUMNS="200")
    path = s.pdir / "tl.jsonl"
    p = subprocess.run(
        [sys.executable, "-m", "pdctl", "watch", "--once", "--json", "--timeline", str(path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2, p.stderr
    error = json.loads(p.stdout)["error"]
    assert error["kind"] == "usage" and error["message"].startswith(
        f"--timeline {path}: goes through {s.pdir}, a symbolic link of uid 65534 in the world-writable sticky "
        f"directory {s.shared}"
    )
    assert "Traceback" not in p.stderr
    _untouched(s)
