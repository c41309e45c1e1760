"""pdctl's record of a keeper's pid and the ending of a keeper by it (pdctl/transport/keeper_pid.py), on real
processes this test starts and kills: a record names its process by pid and start time, nothing that is not the
recorded keeper is ever signalled, and a stopped or SIGTERM-deaf process is still ended (issue 28, W8)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pdctl.transport.keeper_pid import (
    KeeperRecord,
    end_keeper,
    mark_seen,
    not_that_keeper,
    read_record,
    start_time,
    stop_process,
    write_record,
)

# a process that exits on SIGTERM through a Python handler, as the keeper does (so a stopped one needs SIGCONT)
ON_TERM = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); print(1, flush=True); "
    "time.sleep(300)"
)
DEAF = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(300)"


@pytest.fixture
def spawn():
    procs: list[subprocess.Popen] = []

    def start(code: str) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        procs.append(p)
        assert p.stdout is not None and p.stdout.readline() == "1\n"  # its handler is in place
        return p

    yield start
    for p in procs:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(p.pid, sig)
            except ProcessLookupError:
                pass
        p.wait(timeout=10)


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def test_a_record_names_its_process_by_pid_and_start_time(tmp_path, spawn):
    p = spawn(ON_TERM)
    path = str(tmp_path / "k.pid")
    write_record(path, p.pid, "/run/x.sock")
    assert (os.stat(path).st_mode & 0o777) == 0o600
    rec = read_record(path)
    assert rec is not None and (rec.pid, rec.start, rec.socket) == (p.pid, start_time(p.pid), "/run/x.sock")
    os.utime(path, (1, 1))
    mark_seen(path)
    assert time.time() - read_record(path).seen < 60  # type: ignore[union-attr]
    assert start_time(2**22 + 7) is None and read_record(str(tmp_path / "none.pid")) is None
    (tmp_path / "bad.pid").write_text("{not json")
    assert read_record(str(tmp_path / "bad.pid")) is None
    os.symlink(path, tmp_path / "link.pid")
    assert read_record(str(tmp_path / "link.pid")) is None  # a planted link is no record


def test_a_process_that_is_not_the_keeper_is_never_signalled(tmp_path, spawn):
    p = spawn(ON_TERM)
    other_program = KeeperRecord(p.pid, start_time(p.pid) or 0, "/run/x.sock", time.time())
    assert "is not the SSH keeper of /run/x.sock" in (not_that_keeper(other_program) or "")
    ending = end_keeper(other_program, term_wait=0.5, kill_wait=0.5)
    assert not ending.ended and "not the SSH keeper" in (ending.why or "") and p.poll() is None
    # the same pid with another start time: the recorded process ended and its pid went to another
    reused = KeeperRecord(p.pid, (start_time(p.pid) or 0) - 1, "/run/x.sock", time.time())
    assert "no longer the keeper" in (not_that_keeper(reused) or "")
    assert end_keeper(reused, term_wait=0.5, kill_wait=0.5).how == "already gone" and p.poll() is None


def test_a_stopped_process_acts_on_sigterm_once_continued(spawn):
    p = spawn(ON_TERM)
    os.kill(p.pid, signal.SIGSTOP)
    assert _wait(lambda: _state(p.pid) == "T")
    fd = os.pidfd_open(p.pid)
    try:
        ending = stop_process(fd, p.pid, term_wait=10, kill_wait=5)
    finally:
        os.close(fd)
    assert (ending.ended, ending.how) == (True, "SIGTERM") and p.wait(timeout=10) == 0  # its handler ran


def test_a_process_deaf_to_sigterm_is_killed(spawn):
    p = spawn(DEAF)
    fd = os.pidfd_open(p.pid)
    try:
        ending = stop_process(fd, p.pid, term_wait=0.3, kill_wait=5)
    finally:
        os.close(fd)
    assert (ending.ended, ending.how) == (True, "SIGKILL") and p.wait(timeout=10) == -signal.SIGKILL


def _wait(cond, limit: float = 10.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return bool(cond())
