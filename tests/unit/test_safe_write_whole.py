"""pdctl.safe_write's whole-file write (a --report, a baseline, a lineage record): written to a new file beside the
target and renamed over it, so nothing is ever written through a link; a link, a hard-linked file, a FIFO, a device
or another user's file in a sticky world-writable directory is refused naming the file, and nothing is left behind
(issue 28: S4, "every file pdctl writes is opened safely"). Real files, links and FIFOs in a temporary directory."""

from __future__ import annotations

import os
import stat

import pytest

from pdctl import safe_write
from pdctl.errors import UsageError
from pdctl.safe_write import READABLE, check_whole, write_whole


@pytest.fixture
def shared(tmp_path):
    """A directory like /tmp: world-writable and sticky."""
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o1777)
    return d


@pytest.fixture
def victim(tmp_path):
    v = tmp_path / "victim"
    v.write_text("keep\n")
    os.chmod(v, 0o640)
    return v


def _untouched(victim) -> None:
    assert victim.read_text() == "keep\n" and stat.S_IMODE(os.stat(victim).st_mode) == 0o640


def _no_temp_left(d) -> None:
    assert not [p.name for p in d.iterdir() if p.name.startswith(".pdctl-")]


def test_a_new_file_is_whole_with_the_mode_asked_and_a_replaced_one_is_a_new_file(tmp_path):
    old = os.umask(0o022)
    try:
        write_whole(tmp_path / "state.json", "{}", UsageError, "baseline")
        write_whole(tmp_path / "r.html", b"<html>", UsageError, "--report", mode=READABLE)
    finally:
        os.umask(old)
    assert (tmp_path / "state.json").read_text() == "{}"
    assert stat.S_IMODE(os.stat(tmp_path / "state.json").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "r.html").st_mode) == 0o644
    before = os.stat(tmp_path / "r.html").st_ino
    write_whole(tmp_path / "r.html", "<html>2", UsageError, "--report", mode=READABLE)
    assert (tmp_path / "r.html").read_text() == "<html>2" and os.stat(tmp_path / "r.html").st_ino != before
    _no_temp_left(tmp_path)


def test_a_symlink_planted_in_a_sticky_world_writable_directory_is_refused_and_its_target_untouched(shared, victim):
    """The red team's case for --timeline, for a whole-file write: neither written through nor replaced."""
    link = shared / "report.html"
    link.symlink_to(victim)
    for attempt in (
        lambda: check_whole(link, UsageError, "--report"),
        lambda: write_whole(link, "x", UsageError, "--report"),
    ):
        with pytest.raises(UsageError, match=r"^--report .*report\.html: is a symbolic link; pdctl neither"):
            attempt()
    _untouched(victim)
    assert link.is_symlink() and os.readlink(link) == str(victim)
    _no_temp_left(shared)
    dangling = shared / "dangling.svg"  # a variant: a link to where a new file would be made
    dangling.symlink_to(shared.parent / "made-by-link")
    with pytest.raises(UsageError, match="symbolic link"):
        write_whole(dangling, "x", UsageError, "--report")
    assert not (shared.parent / "made-by-link").exists()


def test_a_hard_link_to_another_file_is_refused(shared, victim):
    os.link(victim, shared / "r.svg")
    with pytest.raises(UsageError, match=r"r\.svg: has 1 other hard link\(s\)"):
        write_whole(shared / "r.svg", "x", UsageError, "--report")
    _untouched(victim)
    _no_temp_left(shared)


def test_a_fifo_a_device_and_a_directory_are_refused_unopened(tmp_path):
    fifo = tmp_path / "r.html"
    os.mkfifo(fifo)  # opening it for writing would block until a reader came
    with pytest.raises(UsageError, match=r"r\.html: is a FIFO \(named pipe\), not a regular file"):
        write_whole(fifo, "x", UsageError, "--report")
    with pytest.raises(UsageError, match="/dev/null: is a device"):
        check_whole("/dev/null", UsageError, "--report")
    with pytest.raises(UsageError, match="is a directory"):
        write_whole(tmp_path, "x", UsageError, "--report")
    _no_temp_left(tmp_path)


def test_a_link_planted_while_the_file_is_written_is_refused_before_the_rename(tmp_path, victim, monkeypatch):
    """The target is looked at again just before the rename: a report takes a minute to make."""
    target = tmp_path / "slow.html"
    made = safe_write._new_temp

    def plant_after_the_temp_is_made(p, parent, error, what, mode):
        out = made(p, parent, error, what, mode)
        target.symlink_to(victim)
        return out

    monkeypatch.setattr(safe_write, "_new_temp", plant_after_the_temp_is_made)
    with pytest.raises(UsageError, match="symbolic link"):
        write_whole(target, "x", UsageError, "--report")
    _untouched(victim)
    _no_temp_left(tmp_path)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")
def test_another_users_file_in_a_sticky_shared_directory_is_refused(shared):
    planted = shared / "r.html"
    planted.write_text("theirs")
    os.chown(planted, 65534, 65534)
    with pytest.raises(UsageError, match="belongs to uid 65534 in the world-writable directory"):
        check_whole(planted, UsageError, "--report")
    assert planted.read_text() == "theirs"


def test_check_whole_leaves_nothing_behind_and_names_a_missing_directory(tmp_path):
    check_whole(tmp_path / "new.svg", UsageError, "--report")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(UsageError, match=r"^--report .*nope/r\.svg: cannot be written \(No such file"):
        check_whole(tmp_path / "nope" / "r.svg", UsageError, "--report")
