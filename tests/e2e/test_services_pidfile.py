"""PidfileManager on real processes, both locally and over a real sshd (same code path through the Transport)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from pdctl.errors import StepFailed
from pdctl.services.base import ServiceSpec
from pdctl.services.pidfile import PidfileManager, parse_proc_stat_starttime
from pdctl.transport.local import LocalTransport
from pdctl.transport.ssh import SshTransport

pytestmark = pytest.mark.e2e

SLEEPER = "import time; time.sleep(600)"
STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(600)"
)


@pytest.fixture(params=["local", "ssh"])
def manager(request, tmp_path):
    if request.param == "local":
        transport = LocalTransport("local")
    else:
        sshd = request.getfixturevalue("sshd")
        transport = SshTransport("gpu-test", sshd.make_host())
    m = PidfileManager(transport, str(tmp_path / "state"))
    started: list[str] = []
    m.track = started.append  # tests register names so that teardown stops them even on failure
    yield m
    for name in started:
        try:
            m.stop(name, grace=2)
        except Exception:
            rec = m._recorded(name)
            if rec:
                try:
                    os.killpg(rec["pid"], signal.SIGKILL)
                except OSError:
                    pass
    transport.close()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_start_status_stop_real_process(manager, tmp_path):
    spec = ServiceSpec("sleeper", (sys.executable, "-c", SLEEPER), env={"PDCTL_T": "a b"}, workdir=str(tmp_path))
    assert manager.install(spec) is True
    assert manager.install(spec) is False
    manager.track("sleeper")
    before = time.time()
    manager.start("sleeper")
    st = manager.status("sleeper")
    assert st.active and st.main_pid and st.detail == "running"
    assert before - 2 <= st.started_at <= time.time() + 1
    pid = st.main_pid
    assert os.getpgid(pid) == pid  # own process group (setsid)
    environ = dict(kv.split("=", 1) for kv in open(f"/proc/{pid}/environ").read().split("\0") if "=" in kv)
    assert environ["PDCTL_T"] == "a b" and "PYTEST_CURRENT_TEST" not in environ  # minimal env + spec env
    assert os.readlink(f"/proc/{pid}/cwd") == str(tmp_path)
    manager.start("sleeper")  # no-op while running
    assert manager.status("sleeper").main_pid == pid
    t0 = time.monotonic()
    manager.stop("sleeper", grace=10)
    assert time.monotonic() - t0 < 3  # SIGTERM was enough; no fixed sleeps
    assert not _alive(pid)
    st = manager.status("sleeper")
    assert not st.active and st.main_pid is None
    manager.stop("sleeper")  # no-op when stopped


def test_log_file_and_tail(manager):
    code = (
        "import sys, time; print('to stdout', flush=True); print('to stderr', file=sys.stderr, flush=True); "
        "time.sleep(600)"
    )
    manager.install(ServiceSpec("talker", (sys.executable, "-c", code)))
    manager.track("talker")
    manager.start("talker")
    deadline = time.monotonic() + 10
    while "to stderr" not in manager.log_tail("talker") and time.monotonic() < deadline:
        time.sleep(0.05)
    tail = manager.log_tail("talker", 5)
    assert "to stdout" in tail and "to stderr" in tail


def test_process_exiting_at_once_fails_with_log_tail(manager):
    code = "import sys; print('boom: bad flag --nope', flush=True); sys.exit(2)"
    manager.install(ServiceSpec("crasher", (sys.executable, "-c", code)))
    with pytest.raises(StepFailed) as ei:
        manager.start("crasher")
    assert "crasher" in ei.value.message and "boom: bad flag --nope" in ei.value.message


def test_not_installed_fails(manager):
    with pytest.raises(StepFailed, match="not installed"):
        manager.start("ghost")


def test_stale_pidfile_dead_pid_is_inactive(manager):
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    manager.t.put_file(manager.pid_path("stale"), json.dumps({"pid": proc.pid, "start_ticks": 1, "started_at": 0.0}))
    st = manager.status("stale")
    assert not st.active and st.main_pid is None and "stale pidfile" in st.detail


def test_reused_pid_is_never_mistaken_nor_killed(manager):
    other = subprocess.Popen([sys.executable, "-c", SLEEPER], start_new_session=True)
    try:
        ticks = parse_proc_stat_starttime(open(f"/proc/{other.pid}/stat").read())
        # a pidfile whose pid now belongs to a different (later-started) process
        manager.t.put_file(
            manager.pid_path("reused"), json.dumps({"pid": other.pid, "start_ticks": ticks - 1, "started_at": 0.0})
        )
        st = manager.status("reused")
        assert not st.active and "another process" in st.detail
        manager.stop("reused", grace=1)
        assert other.poll() is None  # the stranger was left alone
        assert manager.t.read_file(manager.pid_path("reused")) is None
    finally:
        other.kill()
        other.wait()


def test_sigterm_ignoring_process_is_sigkilled_after_grace(manager):
    manager.install(ServiceSpec("stubborn", (sys.executable, "-c", STUBBORN)))
    manager.track("stubborn")
    manager.start("stubborn")
    deadline = time.monotonic() + 10
    while "ready" not in manager.log_tail("stubborn") and time.monotonic() < deadline:
        time.sleep(0.02)  # handler installed before we signal
    pid = manager.status("stubborn").main_pid
    t0 = time.monotonic()
    manager.stop("stubborn", grace=1.0)
    took = time.monotonic() - t0
    assert 1.0 <= took < 6
    assert not _alive(pid)
    assert not manager.status("stubborn").active


def test_stop_kills_children_in_the_group(manager, tmp_path):
    marker = tmp_path / "child.pid"
    code = (
        f"import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', "
        f"'import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)']); "
        f"open({str(marker)!r}, 'w').write(str(c.pid)); time.sleep(600)"
    )
    manager.install(ServiceSpec("parent", (sys.executable, "-c", code)))
    manager.track("parent")
    manager.start("parent")
    deadline = time.monotonic() + 10
    while not marker.exists() or not marker.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    child = int(marker.read_text())
    try:
        manager.stop("parent", grace=5)
        deadline = time.monotonic() + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(child)
    finally:
        if _alive(child):  # never leak it, even when the test fails
            os.kill(child, signal.SIGKILL)


def test_purge_removes_spec_pidfile_and_log_of_a_stopped_service_only(manager, tmp_path):
    spec = ServiceSpec("purged", (sys.executable, "-c", SLEEPER), workdir=str(tmp_path))
    manager.install(spec)
    manager.start("purged")
    manager.track("purged")
    paths = [manager.spec_path("purged"), manager.pid_path("purged"), manager.log_path("purged")]
    assert all(os.path.exists(p) for p in paths)
    with pytest.raises(StepFailed, match="stop it before purging"):
        manager.purge("purged")  # a running service keeps its files
    assert all(os.path.exists(p) for p in paths)
    manager.stop("purged", grace=2)
    there = [p for p in paths if os.path.exists(p)]  # the stop took the pidfile
    assert manager.purge("purged") == there and there == [paths[0], paths[2]]
    assert not any(os.path.exists(p) for p in paths)
    assert manager.purge("purged") == ["(no files there)"]  # only what was there is said removed


def test_observe_reads_every_service_and_process_in_one_command(manager, tmp_path):
    from pdctl.services.proc_read import read_process

    for name in ("obs-a", "obs-b", "obs-stale"):
        manager.install(
            ServiceSpec(name, (sys.executable, "-c", SLEEPER), env={"PDCTL_OBS": name}, workdir=str(tmp_path))
        )
        manager.track(name)
        manager.start(name)
    stale_pid = manager.status("obs-stale").main_pid
    os.killpg(stale_pid, signal.SIGKILL)  # its pidfile stays: a stale pidfile
    assert _bounded_wait(lambda: not _alive(stale_pid))
    names = ["obs-a", "obs-b", "obs-stale", "never-installed"]

    runs: list[str] = []
    real_run = manager.t.run
    manager.t.run = lambda cmd, **kw: (runs.append(cmd), real_run(cmd, **kw))[1]
    seen = manager.observe(names)
    assert len(runs) == 1  # one remote command for four services and their /proc
    manager.t.run = real_run

    for name in names:  # the same verdict as asking one by one
        st, info = seen[name]
        one = manager.status(name)
        assert (st.active, st.main_pid, st.detail) == (one.active, one.main_pid, one.detail), name
        if st.active:
            assert info is not None and info.env["PDCTL_OBS"] == name and info.argv[-1] == SLEEPER
            direct = read_process(manager.t, st.main_pid)
            assert (info.start_ticks, info.argv) == (direct.start_ticks, direct.argv)
            assert abs(st.started_at - one.started_at) < 0.02
        else:
            assert info is None
    assert seen["obs-stale"][0].detail == f"stale pidfile: pid {stale_pid} is gone"
    assert seen["never-installed"][0].detail == "not running (no pidfile)"


def _bounded_wait(cond, limit: float = 10.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False
