"""The watch as a service: its unit and command line (pure), the sd_notify client against a real AF_UNIX datagram
socket, and the watch loop's notifications (READY once every cadence ran, WATCHDOG only while rounds complete,
STOPPING at the end), plus the --status judge."""

from __future__ import annotations

import os
import socket
import sys
import threading
import uuid
from pathlib import Path

import pytest

from pdctl.checks.result import Status
from pdctl.checks.watch_service import WatchServiceSeen, judge_watch_service
from pdctl.services.base import ServiceSpec
from pdctl.services.sdnotify import Notifier, socket_address, watchdog_seconds
from pdctl.services.systemd import render_unit


@pytest.fixture
def listener(tmp_path):
    """A datagram socket standing in for systemd's notify socket; yields (NOTIFY_SOCKET value, receive())."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "notify")
    sock.bind(path)
    sock.settimeout(2.0)

    def receive() -> str:
        return sock.recv(4096).decode()

    try:
        yield path, receive, sock
    finally:
        sock.close()


def test_unit_with_a_watchdog_is_type_notify_and_130_is_a_clean_exit():
    spec = ServiceSpec(
        "pdctl-watch-d",
        (sys.executable, "-m", "pdctl", "watch", "-i", "/etc/pdctl/inv.yaml"),
        env={"XDG_STATE_HOME": "/var/lib/x"},
        workdir="/root",
    )
    lines = render_unit(spec, "on-failure", watchdog_sec=30, success_exit_status="130").splitlines()
    for want in (
        "Type=notify",
        "NotifyAccess=main",
        "WatchdogSec=30",
        "Restart=on-failure",
        "SuccessExitStatus=130",
        f"ExecStart={sys.executable} -m pdctl watch -i /etc/pdctl/inv.yaml",
        'Environment="XDG_STATE_HOME=/var/lib/x"',
        "WorkingDirectory=/root",
    ):
        assert want in lines
    assert "Type=simple" not in lines
    plain = render_unit(spec).splitlines()
    assert "Type=simple" in plain and not any(x.startswith(("WatchdogSec", "SuccessExitStatus")) for x in plain)
    with pytest.raises(ValueError, match="WatchdogSec"):
        render_unit(spec, watchdog_sec=0)


def test_watch_argv_is_absolute_and_carries_the_options(tmp_path, monkeypatch):
    from pdctl.ops.watch_service import service_name, watch_argv, watch_spec

    monkeypatch.chdir(tmp_path)
    argv = watch_argv(Path("inv.yaml"), listen="127.0.0.1:9500", listen_any=False, timeline="t.jsonl", heal="on")
    assert argv == (
        sys.executable,
        "-m",
        "pdctl",
        "watch",
        "-i",
        str(tmp_path / "inv.yaml"),
        "--listen",
        "127.0.0.1:9500",
        "--timeline",
        str(tmp_path / "t.jsonl"),
        "--heal",
        "on",
    )
    assert watch_argv(None, listen=None, listen_any=True, timeline="-", heal="off") == (
        sys.executable,
        "-m",
        "pdctl",
        "watch",
        "--listen-any",
        "--timeline",
        "-",
    )
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "st"))
    spec = watch_spec("d1", argv)
    assert spec.name == service_name("d1") == "pdctl-watch-d1" and spec.workdir == str(tmp_path)
    assert spec.env["XDG_STATE_HOME"] == str(tmp_path / "st")  # the service writes the installer's audit log


def test_notify_socket_addresses():
    assert socket_address("/run/systemd/notify") == "/run/systemd/notify"
    assert socket_address("@sd-notify-x") == b"\0sd-notify-x"
    assert socket_address("") is None and socket_address("vsock:2:99") is None
    assert watchdog_seconds({"WATCHDOG_USEC": "3000000"}, 7) == 3.0
    assert watchdog_seconds({"WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "7"}, 7) == 3.0
    assert watchdog_seconds({"WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "8"}, 7) is None  # meant for another
    assert watchdog_seconds({"WATCHDOG_USEC": "0"}, 7) is None and watchdog_seconds({}, 7) is None


def test_notifier_sends_datagrams_to_a_path_socket(listener):
    path, receive, _ = listener
    n = Notifier.from_env({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000", "WATCHDOG_PID": str(os.getpid())})
    try:
        assert n.active and n.watchdog_s == 2.0
        assert n.notify("READY=1\nSTATUS=up") and n.notify("WATCHDOG=1")
        assert receive() == "READY=1\nSTATUS=up" and receive() == "WATCHDOG=1"
        assert n.sent == {"READY": 1, "WATCHDOG": 1}
    finally:
        n.close()


def test_notifier_speaks_to_an_abstract_socket_and_survives_a_missing_one(tmp_path):
    name = f"pdctl-test-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(b"\0" + name.encode())
    sock.settimeout(2.0)
    try:
        n = Notifier.from_env({"NOTIFY_SOCKET": "@" + name})
        assert n.notify("STOPPING=1") and sock.recv(100) == b"STOPPING=1"
        n.close()
    finally:
        sock.close()
    gone = Notifier.from_env({"NOTIFY_SOCKET": str(tmp_path / "nobody")})
    assert gone.notify("WATCHDOG=1") is False and gone.sent == {}  # said nothing, raised nothing
    assert Notifier.from_env({}).notify("READY=1") is False


def test_from_env_unset_keeps_children_from_notifying(monkeypatch, listener):
    monkeypatch.setenv("NOTIFY_SOCKET", listener[0])
    monkeypatch.setenv("WATCHDOG_USEC", "1000000")
    n = Notifier.from_env(unset=True)
    assert n.active and "NOTIFY_SOCKET" not in os.environ and "WATCHDOG_USEC" not in os.environ


def _watch(monkeypatch, block: threading.Event | None):
    """A Watch of the embedded default whose rounds see nothing (or block until `block` is set): the loop alone."""
    from pdctl.inventory import embedded_default, parse_inventory
    from pdctl.ops import watch as watch_mod
    from pdctl.ops.context import Deployment
    from pdctl.ops.watch_rounds import Seen

    def round_(dep):
        if block is not None:
            block.wait(10)
        return Seen()

    for name in watch_mod.ROUNDS:
        monkeypatch.setitem(watch_mod.ROUNDS, name, round_)
    data = embedded_default().dump()
    data["watch"] = {
        "health_every": 0.05,
        "inflight_interval": 0.05,
        "inflight_window": 1,
        "e2e_every": 0.05,
        "pairs_every": 0.05,
        "flags_every": 0.05,
    }
    dep = Deployment(parse_inventory(data, "inv.yaml"))
    return dep, watch_mod.Watch(dep)


def _drain(sock) -> list[str]:
    sock.settimeout(0.2)
    out = []
    try:
        while True:
            out.append(sock.recv(4096).decode())
    except TimeoutError:
        return out


def test_the_loop_says_ready_pings_while_rounds_complete_and_says_stopping(monkeypatch, listener):
    path, _, sock = listener
    dep, w = _watch(monkeypatch, None)
    with dep:
        n = Notifier(socket_address(path), watchdog_s=2.0)  # a ping at most every 0.5 s
        w.run(for_s=1.6, notifier=n)
    got = _drain(sock)
    assert got[0].startswith("READY=1") and got[-1] == "STOPPING=1"
    pings = [g for g in got if g == "WATCHDOG=1"]
    assert len(pings) >= 2 and sum(g.startswith("READY=1") for g in got) == 1


def test_a_wedged_watch_never_pings_the_watchdog(monkeypatch, listener):
    path, _, sock = listener
    block = threading.Event()
    dep, w = _watch(monkeypatch, block)
    try:
        with dep:
            w.run(for_s=1.0, notifier=Notifier(socket_address(path), watchdog_s=0.2))
    finally:
        block.set()
    # every round hung: never ready, never fed; the loop itself still ran to its end
    assert _drain(sock) == ["STOPPING=1"]


def test_a_manager_that_does_not_read_never_stalls_the_sender(listener):
    path, _, sock = listener
    n = Notifier(socket_address(path))
    sent = []
    while len(sent) < 10000 and (not sent or sent[-1]):  # until the queue is full, nobody reading
        sent.append(n.notify("WATCHDOG=1"))
    assert sent[0] and sent[-1] is False and n.sent["WATCHDOG"] == len(sent) - 1  # dropped, not stuck
    n.close()


def test_status_judge_says_what_is_wrong_first():
    def seen(**kw):
        base = dict(
            installed=True,
            active=True,
            pid=42,
            detail="running",
            restarts=1,
            exporter_url="http://127.0.0.1:9464/metrics",
            last_round=95.0,
            now=100.0,
        )
        return WatchServiceSeen(**{**base, **kw})

    ok = judge_watch_service(seen(), 1.0, name="w")
    assert [(c.name, c.status) for c in ok] == [
        ("service", Status.PASS),
        ("exporter", Status.PASS),
        ("rounds", Status.PASS),
    ]
    assert ok[0].observed == "running, pid 42, restarted 1x by systemd"
    late = judge_watch_service(seen(last_round=50.0), 1.0, name="w")[-1]
    assert (
        late.status is Status.FAIL and late.observed == "last round 50s ago" and late.expected == "a round within 13s"
    )
    deaf = judge_watch_service(seen(scrape_error="ConnectError: refused"), 1.0, name="w")
    assert deaf[-1].name == "exporter" and deaf[-1].failed and len(deaf) == 2
    down = judge_watch_service(seen(active=False, detail="failed/failed"), 1.0, name="w")
    assert len(down) == 1 and down[0].observed == "not running (failed/failed)"
    assert judge_watch_service(seen(installed=False), 1.0, name="w")[0].observed == "not installed"


def test_status_line_of_the_watch_service():
    from pdctl.render.watch_service import watch_line

    assert (
        watch_line({"service": "pdctl-watch-d", "manager": "systemd", "state": "running", "pid": 9, "restarts": 2})
        == "watch: pdctl-watch-d running, pid 9 (systemd, restarted 2x); "
        "pdctl watch --status"
    )
    assert (
        watch_line({"service": "w", "manager": "pidfile", "state": "not installed", "pid": None})
        == "watch: not installed (pdctl watch --install runs it as a service)"
    )
    assert (
        watch_line(
            {
                "service": "w",
                "manager": "pidfile",
                "state": "stopped",
                "pid": None,
                "detail": "stale pidfile: pid 7 is gone",
            }
        )
        == "watch: w stopped (stale pidfile: pid 7 is gone)"
    )
