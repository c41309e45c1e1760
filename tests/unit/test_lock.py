"""The deployment lock on a real directory through the local transport: refusal names the holder; a dead holder's
lock and an owner-less stale lock are taken over; release removes only our own lock."""

import json
import os
import subprocess
import sys
import time

import pytest

from pdctl.errors import LockHeld
from pdctl.lock import DeploymentLock
from pdctl.transport.local import LocalTransport


def test_second_operator_is_refused_and_told_who_holds_it(tmp_path):
    t = LocalTransport()
    d = str(tmp_path / "locks" / "x.lock")
    with DeploymentLock(t, d, "alice", "restart --pair"):
        with pytest.raises(LockHeld) as e:
            DeploymentLock(t, d, "bob", "deploy").acquire()
        assert "alice" in e.value.message and "restart --pair" in e.value.message
        assert e.value.exit_code == 4
    assert not os.path.exists(d)


def test_lock_of_a_dead_holder_on_this_machine_is_taken_over(tmp_path):
    t = LocalTransport()
    d = tmp_path / "x.lock"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lk = DeploymentLock(t, str(d), "ghost", "deploy")
    lk.info.pid = dead.pid
    d.mkdir()
    (d / "owner.json").write_text(json.dumps(lk.info.__dict__))
    with DeploymentLock(t, str(d), "carol", "deploy") as mine:
        assert json.loads((d / "owner.json").read_text())["operator"] == "carol"
        assert mine.held


def test_ownerless_lock_is_held_while_fresh_and_taken_over_when_stale(tmp_path):
    t = LocalTransport()
    d = tmp_path / "x.lock"
    d.mkdir()
    with pytest.raises(LockHeld):
        DeploymentLock(t, str(d), "dave", "deploy").acquire()
    old = time.time() - 3600
    os.utime(d, (old, old))
    with DeploymentLock(t, str(d), "dave", "deploy") as mine:
        assert mine.held


def test_two_operators_taking_over_one_stale_lock_never_both_hold_it(tmp_path):
    import threading

    t = LocalTransport()
    d = tmp_path / "x.lock"
    for _round in range(5):
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        ghost = DeploymentLock(t, str(d), "ghost", "deploy")
        ghost.info.pid = dead.pid
        d.mkdir()
        (d / "owner.json").write_text(json.dumps(ghost.info.__dict__))
        won, barrier = [], threading.Barrier(2)

        def contend(name):
            lk = DeploymentLock(t, str(d), name, "restart --pair")
            barrier.wait()
            try:
                lk.acquire()
                won.append(lk)
            except LockHeld:
                pass

        threads = [threading.Thread(target=contend, args=(n,)) for n in ("erin", "frank")]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        assert len(won) <= 1
        holder = json.loads((d / "owner.json").read_text())["operator"] if d.exists() else None
        assert [lk.info.operator for lk in won] == ([holder] if holder else [])
        for lk in won:
            lk.release()
        assert not d.exists()
