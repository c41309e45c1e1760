"""A kept SSH connection whose keeper stops answering (issue 28, W8), with real parts: a real sshd, real keepers
that the test SIGSTOPs, and `pdctl status` / `pdctl ssh` runs. A healthy host stays judged on its own answer (the
run bypasses the silent keeper), `pdctl ssh --close` ends the keeper by the pid pdctl recorded or says it could not
(exit 1), and a silent keeper past its keep seconds is ended by the next run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.helpers import local_inventory, pdctl, write_inventory
from tests.fixtures.keepers import control, vsshd  # noqa: F401 (fixtures)
from tests.fixtures.keepers import accepted, kept_host, pid_alive, wait_until
from tests.fixtures.net import free_port

pytestmark = pytest.mark.e2e


def _stopped_state(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "T"
    except (OSError, IndexError):
        return False


def _release(pid: int | None) -> None:
    """The test stopped this keeper: continue and kill it, whatever the test came to."""
    if pid is None:
        return
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return


def _fill_backlog(path: Path) -> list[socket.socket]:
    """Connect to the stopped keeper until its listen queue is full (each bypassed run leaves a connection in it,
    closed or not, until the keeper accepts): the connections, for the caller to close."""
    conns = []
    for _ in range(1024):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(1)
        try:
            c.connect(str(path))
        except BlockingIOError:
            c.close()
            return conns
        conns.append(c)
    raise AssertionError("the keeper's listen queue never filled")


def _inventory(vsshd, tmp_path) -> Path:
    host = kept_host(vsshd, http="tunnel", state_dir=str(tmp_path / "remote"), python=sys.executable)
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    return write_inventory(tmp_path / "inv.yaml", local_inventory("keep", ports, host=host))


def _status(inv: Path, tmp_path, control) -> tuple[int, set[str], str]:
    r = pdctl(["status", "-i", str(inv), "--json"], state=tmp_path, env=control.env, timeout=120)
    return r.code, {x["state"] for x in r.json().get("roles", [])}, r.output


def _started_and_stopped(inv: Path, tmp_path, control) -> int:
    """Start the host's keeper with a real run, then SIGSTOP it; its pid."""
    code, states, out = _status(inv, tmp_path, control)
    assert (code, states) == (1, {"stopped"}), out  # nothing deployed: the roles are stopped, the host answers
    (row,) = pdctl(["ssh", "-i", str(inv), "--json"], state=tmp_path, env=control.env).json()["connections"]
    assert row["state"] == "kept" and pid_alive(row["pid"]), row
    os.kill(row["pid"], signal.SIGSTOP)
    assert wait_until(lambda: _stopped_state(row["pid"]))
    return row["pid"]


def test_a_stopped_keeper_is_bypassed_and_ssh_close_ends_it(vsshd, control, tmp_path):
    inv = _inventory(vsshd, tmp_path)
    pid = None
    try:
        pid = _started_and_stopped(inv, tmp_path, control)
        before = accepted(vsshd)
        for _ in range(2):  # before: "unknown" (exit 3) on every run, for as long as the keeper stays stopped
            code, states, out = _status(inv, tmp_path, control)
            assert (code, states) == (1, {"stopped"}), out
        assert accepted(vsshd) - before == 2  # each run connected on its own
        queued = _fill_backlog(next(control.dir.glob("*.sock")))  # runs' connections it never accepted
        code, states, out = _status(inv, tmp_path, control)
        assert (code, states) == (1, {"stopped"}), out
        for c in queued:
            c.close()
        assert _stopped_state(pid) and "connects to the host directly" in next(control.dir.glob("*.log")).read_text()

        listed = pdctl(["ssh", "-i", str(inv), "--json"], state=tmp_path, env=control.env)
        (row,) = listed.json()["connections"]
        assert listed.code == 0 and (row["state"], row["pid"]) == ("not answering", pid), listed.output
        assert 0 <= row["idle_for"] < 60 and 0 < row["expires_in"] <= 60, row

        closed = pdctl(["ssh", "--close", "-i", str(inv)], state=tmp_path, env=control.env)
        assert closed.code == 0, closed.output  # before: "does not answer", exit 0, and the keeper still there
        assert f"closed local (keeper pid {pid}, which did not answer: ended by SIGTERM)" in closed.stdout
        assert not pid_alive(pid) and control.keeper_pids() == []
        assert not os.path.exists(row["socket"])  # SIGTERM after SIGCONT: the keeper unlinked its socket itself
    finally:
        _release(pid)
    code, states, out = _status(inv, tmp_path, control)  # a new keeper for the next run
    assert (code, states) == (1, {"stopped"}), out
    assert len(control.keeper_pids()) == 1 and control.keeper_pids() != [pid]


def test_a_stopped_keeper_past_its_keep_is_ended_by_the_next_run(vsshd, control, tmp_path):
    inv = _inventory(vsshd, tmp_path)
    pid = None
    try:
        pid = _started_and_stopped(inv, tmp_path, control)
        (record,) = control.dir.glob("*.pid")
        assert json.loads(record.read_text())["pid"] == pid
        # no client got a word from it for longer than its keep (60 s): its record says when one last did
        then = time.time() - 61
        os.utime(record, (then, then))
        before = accepted(vsshd)
        code, states, out = _status(inv, tmp_path, control)
        assert (code, states) == (1, {"stopped"}), out
        assert wait_until(lambda: not pid_alive(pid)), "the expired keeper still runs"
        (new,) = control.keeper_pids()
        assert new != pid and json.loads(record.read_text())["pid"] == new
        assert accepted(vsshd) - before == 1  # the new keeper's connection, which the run went through
        listed = pdctl(["ssh", "-i", str(inv), "--json"], state=tmp_path, env=control.env).json()["connections"]
        assert (listed[0]["state"], listed[0]["pid"]) == ("kept", new), listed
    finally:
        _release(pid)


def test_ssh_close_never_signals_a_pid_that_is_not_the_keeper(vsshd, control, tmp_path):
    """Variant: the record names another process (a reused pid, a tampered file): --close signals nothing, says
    so, and exits 1; without any record it cannot end the keeper either, and says that."""
    inv = _inventory(vsshd, tmp_path)
    pid = None
    bystander = subprocess.Popen(["sleep", "300"])
    try:
        pid = _started_and_stopped(inv, tmp_path, control)
        (record,) = control.dir.glob("*.pid")
        data = json.loads(record.read_text())
        record.write_text(json.dumps({**data, "pid": bystander.pid}))
        r = pdctl(["ssh", "--close", "-i", str(inv), "--json"], state=tmp_path, env=control.env)
        (row,) = r.json()["closed"]
        assert r.code == 1 and row["closed"] is False and "nothing signalled" in row["problem"], r.output
        assert bystander.poll() is None and _stopped_state(pid)  # neither the bystander nor the keeper was touched

        record.unlink()
        screen = pdctl(["ssh", "--close", "-i", str(inv)], state=tmp_path, env={**control.env, "COLUMNS": "80"})
        words = " ".join(screen.stdout.split())  # the line may wrap at 80 columns
        assert screen.code == 1 and "was NOT ended: pdctl has no record of its pid" in words, screen.output
        assert max(map(len, screen.stdout.splitlines())) <= 80, screen.stdout
        assert "Traceback" not in screen.output and _stopped_state(pid)
    finally:
        bystander.kill()
        bystander.wait(timeout=10)
        _release(pid)
