"""Each pidfile start writes a marker line to the service's log; the tail shown after a failed start begins at the
current process's marker, so an earlier process's lines (its "ready" line) never pass for the new one's.
Real processes through the local transport; every process started here is stopped at the end."""

from __future__ import annotations

import re

import pytest

from pdctl.errors import StepFailed
from pdctl.services import pidfile
from pdctl.services.base import ServiceSpec
from pdctl.services.pidfile import START_MARKER, PidfileManager, since_last_start
from pdctl.transport.local import LocalTransport

# each run numbers itself from a counter file, says "ready", then fails after `linger` seconds
SCRIPT = (
    "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; "
    'echo "process $n ready"; sleep "$LINGER"; echo "process $n failing"; exit 3'
)


@pytest.fixture
def manager(tmp_path):
    m = PidfileManager(LocalTransport(), str(tmp_path / "state"), command_timeout=10)
    yield m
    m.stop("svc", grace=1)


def install(m: PidfileManager, tmp_path, linger: str) -> None:
    m.install(ServiceSpec("svc", ("/bin/sh", "-c", SCRIPT), env={"LINGER": linger}, workdir=str(tmp_path)))


def test_failed_start_shows_only_the_second_process_lines(manager, tmp_path):
    install(manager, tmp_path, "0")
    with pytest.raises(StepFailed) as first:
        manager.start("svc")
    assert "process 1 ready" in first.value.message
    with pytest.raises(StepFailed) as second:
        manager.start("svc")
    msg = second.value.message
    assert "process 2 ready" in msg and "process 2 failing" in msg
    assert "process 1" not in msg
    pid = re.search(r"\(pid (\d+)\) exited", msg).group(1)
    assert re.search(
        rf"^{re.escape(START_MARKER)}svc at \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(pid {pid}\) ====$", msg, re.M
    ), msg
    # `pdctl logs` (a manager that started nothing) still shows the whole tail, both markers visible
    whole = PidfileManager(LocalTransport(), manager.state_dir).log_tail("svc", 50)
    assert whole.count(START_MARKER) == 2
    assert whole.index("process 1 ready") < whole.rindex(START_MARKER) < whole.index("process 2 ready")


def test_tail_after_a_start_that_dies_later_begins_at_that_start(manager, tmp_path, monkeypatch):
    """readiness.wait_ready's "exited while starting" reads log_tail(name, lines=20) after a start that passed the
    pidfile's own check: the same manager shows the current process's lines only."""
    monkeypatch.setattr(pidfile, "START_CHECK_SECONDS", 0.2)
    install(manager, tmp_path, "0")
    with pytest.raises(StepFailed):
        manager.start("svc")
    install(manager, tmp_path, "0.6")
    manager.start("svc")  # stays up past the start check
    pid = manager.status("svc").main_pid
    assert pid
    from pdctl.poll import poll_until

    assert poll_until(lambda: manager.status("svc").active, lambda up: not up, timeout=5, interval=0.05).ok
    tail = manager.log_tail("svc", lines=20)
    assert tail.startswith(START_MARKER) and f"(pid {pid})" in tail.splitlines()[0]
    assert "process 2 failing" in tail and "process 1" not in tail


def test_since_last_start_without_marker_keeps_everything():
    assert since_last_start("a\nb\n") == "a\nb\n"
    text = f"old\n{START_MARKER}x at T (pid 1) ====\nnew\n"
    assert since_last_start(text) == f"{START_MARKER}x at T (pid 1) ====\nnew\n"
