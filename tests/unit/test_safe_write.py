"""pdctl.safe_write: what pdctl appends to is never a link it did not make, a file planted by another user, a device
or (unless allowed) a FIFO, and never blocks; a file it creates is 0600 (issue 28: S4, and S2's timeline mode).
Real files, links, FIFOs and devices in a temporary directory."""

from __future__ import annotations

import os
import stat

import pytest

from pdctl.errors import UsageError
from pdctl.safe_write import NoReader, open_append


def _append(path, data=b"x\n", **kw):
    fd = open_append(path, UsageError, "timeline", **kw)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def test_a_new_file_is_made_0600_whatever_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        _append(tmp_path / "t.jsonl")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "t.jsonl").st_mode) == 0o600
    _append(tmp_path / "t.jsonl", b"y\n")  # an existing file of ours: appended to
    assert (tmp_path / "t.jsonl").read_bytes() == b"x\ny\n"


def test_a_symlink_planted_in_a_sticky_world_writable_directory_is_refused_and_its_target_untouched(tmp_path):
    """The red team's case: a link in a 1777 directory pointing at a root-owned file made root append to it."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (shared / "timeline.jsonl").symlink_to(victim)
    with pytest.raises(UsageError, match=r"timeline .*timeline\.jsonl: is a symbolic link"):
        _append(shared / "timeline.jsonl")
    assert victim.read_text() == "keep\n"
    # a variant: a dangling link (it would create the file where the link points)
    (shared / "dangling").symlink_to(tmp_path / "made-by-link")
    with pytest.raises(UsageError, match="symbolic link"):
        _append(shared / "dangling")
    assert not (tmp_path / "made-by-link").exists()


def test_a_link_higher_up_the_path_is_the_operators_own_and_followed(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "logs").symlink_to(tmp_path / "real")
    _append(tmp_path / "logs" / "t.jsonl")
    assert (tmp_path / "real" / "t.jsonl").read_bytes() == b"x\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")
def test_another_users_file_in_a_sticky_shared_directory_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    planted = shared / "timeline.jsonl"
    planted.write_text("")
    os.chown(planted, 65534, 65534)
    with pytest.raises(UsageError, match="belongs to uid 65534 in the world-writable directory"):
        _append(planted)
    own = tmp_path / "private"  # not a shared directory: the operator's choice, appended to
    own.mkdir()
    theirs = own / "t.jsonl"
    theirs.write_text("")
    os.chown(theirs, 65534, 65534)
    _append(theirs)
    assert theirs.read_bytes() == b"x\n"


def test_a_hard_link_to_another_file_is_refused(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    os.link(victim, tmp_path / "t.jsonl")
    with pytest.raises(UsageError, match="other hard link"):
        _append(tmp_path / "t.jsonl")
    assert victim.read_text() == "keep\n"


def test_a_device_a_directory_and_a_fifo_are_refused_without_blocking(tmp_path):
    with pytest.raises(UsageError, match="/dev/full: is a device"):
        _append("/dev/full")
    with pytest.raises(UsageError, match="is a directory"):
        _append(tmp_path)
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="is a FIFO"):
        _append(fifo)  # not allowed here: refused, not opened (which would block with no reader)


def test_an_allowed_fifo_with_no_reader_says_so_at_once_and_opens_once_read(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(NoReader):
        open_append(fifo, UsageError, "timeline", fifo=True)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        fd = open_append(fifo, UsageError, "timeline", fifo=True)
        assert not os.get_blocking(fd)  # a reader that does not read can never stall the writer
        os.write(fd, b"line\n")
        os.close(fd)
        assert os.read(reader, 100) == b"line\n"
    finally:
        os.close(reader)


def test_a_missing_directory_is_a_usage_error_naming_the_file(tmp_path):
    with pytest.raises(UsageError, match=r"timeline .*nope/t\.jsonl: cannot be written \(No such file"):
        _append(tmp_path / "nope" / "t.jsonl")
