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


def _ghost_lock(d, action="deploy", run="r123"):
    """A lock left by a process that is gone (a real pid, reaped)."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    ghost = DeploymentLock(LocalTransport(), str(d), "ghost", action, run=run)
    ghost.info.pid = dead.pid
    d.mkdir()
    (d / "owner.json").write_text(json.dumps(ghost.info.__dict__))
    return dead.pid


def test_taking_over_a_dead_holders_lock_is_reported_with_who_what_and_since_when(tmp_path):
    d = tmp_path / "x.lock"
    pid = _ghost_lock(d)
    seen = []
    lk = DeploymentLock(LocalTransport(), str(d), "carol", "restart --pair", on_takeover=seen.append)
    assert lk.abandoned() is not None  # reported before anyone takes it (what status would show)
    with lk:
        (ab,) = seen
        assert ab.owner.pid == pid and ab.owner.action == "deploy" and ab.owner.run == "r123"
        text = ab.describe()
        assert "abandoned" in text and "ghost" in text and "'deploy'" in text and f"pid {pid}" in text
        assert "since " in text and lk.took_over == ab
        assert lk.abandoned() is None  # ours now, and we are alive


def test_a_live_holder_is_not_abandoned_and_a_fresh_lock_is_no_takeover(tmp_path):
    d = tmp_path / "x.lock"
    seen = []
    with DeploymentLock(LocalTransport(), str(d), "alice", "deploy") as held:
        assert held.abandoned() is None
    with DeploymentLock(LocalTransport(), str(d), "bob", "deploy", on_takeover=seen.append) as lk:
        assert seen == [] and lk.took_over is None


def test_an_ownerless_stale_lock_is_reported_as_abandoned_with_its_age(tmp_path):
    d = tmp_path / "x.lock"
    d.mkdir()
    old = time.time() - 3600
    os.utime(d, (old, old))
    ab = DeploymentLock(LocalTransport(), str(d), "dave", "deploy").abandoned()
    assert ab is not None and ab.owner is None and "no owner.json" in ab.describe() and "s old" in ab.describe()


def test_a_takeover_that_cannot_be_said_leaves_no_lock_behind(tmp_path):
    d = tmp_path / "x.lock"
    _ghost_lock(d)

    def cannot(_ab):
        raise RuntimeError("audit log unwritable")

    with pytest.raises(RuntimeError):
        DeploymentLock(LocalTransport(), str(d), "carol", "deploy", on_takeover=cannot).acquire()
    assert not d.exists()


def test_an_owner_record_with_keys_it_does_not_know_still_names_its_holder(tmp_path):
    d = tmp_path / "x.lock"
    with DeploymentLock(LocalTransport(), str(d), "alice", "deploy"):
        info = json.loads((d / "owner.json").read_text())
        (d / "owner.json").write_text(json.dumps({**info, "added_later": 1}))
        with pytest.raises(LockHeld) as e:
            DeploymentLock(LocalTransport(), str(d), "bob", "deploy").acquire()
        assert "alice" in e.value.message


def test_a_host_that_does_not_answer_makes_the_lock_unknown_not_failed(tmp_path):
    """mkdir that hangs (a hung host or filesystem): exit 3 "unknown", never exit 1 "lock: timed out"."""
    from pdctl.errors import UnreachableError

    class HungLocal(LocalTransport):
        def run(self, command, *, timeout, env=None):  # the real local runner, on a command that never returns
            return super().run(f"sleep 30; {command}", timeout=min(timeout, 0.5), env=env)

    d = tmp_path / "x.lock"
    with pytest.raises(UnreachableError) as e:
        DeploymentLock(HungLocal(), str(d), "alice", "restart --pair").acquire()
    assert e.value.exit_code == 3 and "did not answer" in e.value.message and "deployment lock" in e.value.message
    assert not d.exists()


GOOD = {
    "operator": "alice",
    "action": "restart --pair",
    "since": 1700000000.0,
    "hostname": "h1",
    "pid": 4242,
    "token": "t",
    "run": "r1",
}


@pytest.mark.parametrize(
    "change",
    [
        {"since": "2025"},
        {"since": None},
        {"since": 1e400},
        {"since": float("nan")},
        {"since": True},
        {"pid": "4242"},
        {"pid": [1]},
        {"pid": 0},
        {"pid": -1},
        {"pid": True},
        {"operator": 7},
        {"run": None},
        {"since": ...},
        {"token": ...},
        {"hostname": ...},
    ],
)
def test_an_owner_record_of_the_wrong_shape_is_no_owner(change):
    """A malformed owner.json crashed status, triage and down (`int(time.time() - "2025")`, `os.kill("4242", 0)`),
    and pid 0 or -1 read as a live holder (os.kill signals a process group). Now it is no owner record."""
    from pdctl.lock import LockInfo

    data = {k: v for k, v in {**GOOD, **change}.items() if v is not ...}
    raw = json.dumps(data).replace("Infinity", "1e400")
    assert LockInfo.from_json(raw) is None
    assert LockInfo.from_json(json.dumps(GOOD)) == LockInfo(**GOOD)


def test_holder_names_a_live_holder_and_never_keeps_silent_about_a_fresh_unreadable_lock(tmp_path):
    t = LocalTransport()
    d = tmp_path / "x.lock"
    lk = DeploymentLock(t, str(d), "reader", "status")
    assert lk.holder() is None  # free
    with DeploymentLock(t, str(d), "alice", "restart --pair"):
        assert lk.holder().startswith(f"alice (restart --pair, pid {os.getpid()} on ")
    d.mkdir()
    (d / "owner.json").write_text(
        json.dumps({**GOOD, "hostname": os.uname().nodename, "pid": os.getpid(), "since": "yesterday"})
    )
    said = lk.holder()
    assert said is not None and "unknown holder" in said and "owner.json is missing or unreadable" in said
    old = time.time() - 3600
    os.utime(d, (old, old))
    assert lk.holder() is None and lk.abandoned() is not None  # old and unreadable: abandoned, said by status


class CountingTransport(LocalTransport):
    """The local transport, counting what a lock read costs (over SSH each is a remote command)."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def read_file(self, path):
        self.calls += 1
        return super().read_file(path)

    def run(self, cmd, **kw):
        self.calls += 1
        return super().run(cmd, **kw)


def test_state_is_one_read_and_says_held_or_abandoned(tmp_path):
    """`status` says both who holds the lock and whether it was abandoned: one read of owner.json gives both (it
    read the lock twice, up to four remote commands where two do)."""
    d = tmp_path / "x.lock"
    t = CountingTransport()
    lk = DeploymentLock(t, str(d), "reader", "status")
    with DeploymentLock(LocalTransport(), str(d), "alice", "restart --rolling"):
        st = lk.state()
        assert st.holder.startswith("alice (restart --rolling, pid ") and st.abandoned is None
        assert t.calls == 1  # owner.json names a live owner: no age read
    t.calls = 0
    d.mkdir()
    (d / "owner.json").write_text(json.dumps({**GOOD, "hostname": os.uname().nodename, "pid": 2**22 + 12345}))
    st = lk.state()  # a dead holder on this machine
    assert st.holder is None and st.abandoned is not None and st.abandoned.owner.operator == GOOD["operator"]
    assert t.calls == 1
