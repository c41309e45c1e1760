"""A server of the bundled engine is two processes, as SGLang's (engine/scheduler_process.py): the launched HTTP
process and the scheduler process it forks. Real prefill servers on loopback: a stop of the launched pid alone
ends both and leaves the scheduler's bootstrap port free; a scheduler process that dies takes the server down
(exit 1, saying why) instead of leaving /health answering; only the scheduler process loads torch."""

from __future__ import annotations

import os
import signal
import socket

import httpx
import pytest

from tests.engine.stack import Stack, server_pids

pytestmark = pytest.mark.engine


def _maps(pid: int) -> str:
    with open(f"/proc/{pid}/maps") as f:
        return f.read()


@pytest.fixture
def prefill():
    s = Stack()
    s.start_prefill()
    try:
        s.wait_healthy(s.prefill)
        yield s
    finally:
        s.stop()


def _scheduler_of(s: Stack) -> int:
    pids = server_pids(s.procs["prefill"].pid)
    assert len(pids) == 2, pids
    return pids[1]


def test_only_the_scheduler_process_loads_torch(prefill):
    http, sched = prefill.procs["prefill"].pid, _scheduler_of(prefill)
    # after a generation has crossed both processes (the HTTP side builds its Req, answers from its events)
    assert httpx.get(f"{prefill.prefill}/health_generate", timeout=30).status_code == 200
    assert "libtorch" in _maps(sched)
    assert "libtorch" not in _maps(http)


def test_a_stop_of_the_launched_pid_ends_both_and_frees_the_bootstrap_port(prefill):
    p = prefill.procs["prefill"]
    sched = _scheduler_of(prefill)
    os.kill(p.pid, signal.SIGTERM)  # the pid alone, as a pidfile's stop falls back to
    p.wait(30)
    assert not os.path.exists(f"/proc/{sched}"), "the scheduler process outlived the server"
    with socket.socket() as sock:  # a restart binds it again at once
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", prefill.bp))


def test_a_dead_scheduler_process_takes_the_server_down(prefill):
    p = prefill.procs["prefill"]
    os.kill(_scheduler_of(prefill), signal.SIGKILL)
    assert p.wait(30) == 1
    log = prefill.logs()
    assert "the scheduler process exited (killed by SIGKILL); stopping the server" in log, log
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{prefill.prefill}/health", timeout=2)


def test_a_server_that_cannot_start_says_why_once(prefill):
    """The bootstrap port is the scheduler process's: a second prefill on it fails there, and the HTTP process
    prints the reason once and exits 1, with no traceback from either process."""
    second = Stack()
    second.bp = prefill.bp
    second.start_prefill()
    try:
        p = second.procs["prefill"]
        assert p.wait(60) == 1
        log = second.logs()
        assert log.count("error: cannot start:") == 1, log
        assert "Traceback" not in log, log
    finally:
        second.stop()
    assert httpx.get(f"{prefill.prefill}/health", timeout=5).status_code == 200
