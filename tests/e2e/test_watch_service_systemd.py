"""`pdctl watch --install` under a live systemd: pdctl itself runs INSIDE a systemd test host (its own systemd as
PID 1, tests/fixtures/systemd_host.py; this Python and the checkout are bind-mounted there), as an operator's
machine would, against an inventory whose role host does not answer (an SSH port nothing listens on).

The unit is Type=notify with the watchdog; the watch says READY=1 (so `systemctl start` returned), keeps feeding
the watchdog well past WatchdogSec, reports its targets unknown on its exporter and keeps running; a SIGKILL is
restarted by Restart=on-failure (NRestarts 1); a watch that stops completing rounds (SIGSTOP) is killed by the
watchdog and restarted (Result=watchdog, NRestarts 2); --uninstall stops, disables and removes it.
"""

from __future__ import annotations

import json
import shlex
import sys
import time

import httpx
import pytest

from pdctl.checks.metrics import parse_metrics
from pdctl.services.systemd import parse_systemctl_show
from tests.fixtures.net import free_port
from tests.fixtures.systemd_host import REPO, can_boot_hosts, systemd_host

pytestmark = [pytest.mark.e2e]

WATCHDOG_S = 3
STATE = "/var/lib/pdctl-watch-test"
INV = "/root/watch-inv.yaml"


def _inventory(dead_port: int) -> str:
    return "\n".join(
        [
            "name: far",
            "engine: bundled",
            "hosts:",
            # nothing listens there: every read of it is unreachable (unknown), never a stopped role
            f"  gpu: {{transport: ssh, address: 127.0.0.1, port: {dead_port}, user: root, connect_timeout: 2,"
            " http: tunnel}",
            "roles:",
            "  prefill: [{host: gpu, port: 30000, bootstrap_port: 8998}]",
            "  decode: [{host: gpu, port: 30002}]",
            "  router: [{host: gpu, port: 30001}]",
            "watch: {health_every: 1, inflight_interval: 1, inflight_window: 4, e2e_every: 5, pairs_every: 5, "
            "flags_every: 5}",
            "",
        ]
    )


def _pdctl_inside(h, *args: str, timeout: float = 180):
    """`python -m pdctl ARGS` inside the host, as root there, in /root, with a clean environment."""
    env = [
        "env",
        "-i",
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME=/root",
        f"XDG_STATE_HOME={STATE}",
        f"PYTHONPATH={REPO}",
        "COLUMNS=200",
    ]
    cmd = "cd /root && exec " + shlex.join([*env, sys.executable, "-m", "pdctl", *args])
    return h.run(["sh", "-c", cmd], timeout=timeout)


def _show(h, unit: str) -> dict[str, str]:
    props = [
        "Type",
        "WatchdogUSec",
        "NRestarts",
        "MainPID",
        "ActiveState",
        "SubState",
        "Result",
        "LoadState",
        "UnitFileState",
        "FragmentPath",
        "Restart",
    ]
    res = h.run(["systemctl", "show", unit, *[a for p in props for a in ("-p", p)]])
    assert res.returncode == 0, res.stderr
    return parse_systemctl_show(res.stdout)


def _wait(what: str, ok, timeout: float = 60.0, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = ok()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"not {what} within {timeout:g}s")


def _scrape(port: int):
    r = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5.0)
    assert r.status_code == 200
    return parse_metrics(r.text)


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    reason = can_boot_hosts()
    if reason:
        pytest.skip(reason)
    with systemd_host(tmp_path_factory.mktemp("watch-systemd") / "ops") as h:
        text = _inventory(free_port())
        res = h.run(["sh", "-c", f"printf %s {shlex.quote(text)} > {INV}"])
        assert res.returncode == 0, res.stderr
        yield {"host": h, "port": free_port()}


UNIT = "pdctl-watch-far.service"


def test_install_runs_a_notify_unit_whose_watchdog_is_fed(host):
    h, port = host["host"], host["port"]
    res = _pdctl_inside(
        h,
        "watch",
        "--install",
        "-i",
        INV,
        "--listen",
        f"127.0.0.1:{port}",
        "--watchdog",
        str(WATCHDOG_S),
        "--heal",
        "dry",
        "--json",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["manager"] == "systemd" and doc["active"] and doc["changed"]
    assert doc["path"] == f"/etc/systemd/system/{UNIT}" and doc["stop_with"] == "systemctl stop pdctl-watch-far"
    assert doc["argv"] == [
        sys.executable,
        "-m",
        "pdctl",
        "watch",
        "-i",
        INV,
        "--listen",
        f"127.0.0.1:{port}",
        "--heal",
        "dry",
    ]
    show = _show(h, UNIT)
    assert show["Type"] == "notify" and show["WatchdogUSec"] == f"{WATCHDOG_S}s" and show["Restart"] == "on-failure"
    assert show["ActiveState"] == "active" and show["NRestarts"] == "0" and show["UnitFileState"] == "enabled"
    assert int(show["MainPID"]) == doc["pid"]
    verify = h.run(["systemd-analyze", "verify", show["FragmentPath"]])
    assert verify.returncode == 0 and UNIT not in verify.stdout + verify.stderr, verify.stdout + verify.stderr
    # the exporter answers, and the host that does not answer is unknown there, not down
    m = _scrape(port)
    assert m.value("pdctl_watch_info", deployment="far") == 1
    up = m.samples("pdctl_target_up")
    assert up and {s.value for s in up} == {0.0}, [s.series() for s in up]
    # three times WatchdogSec later: the same process, never restarted, rounds still completing
    first = max(s.value for s in m.samples("pdctl_round_last_timestamp_seconds"))
    time.sleep(3 * WATCHDOG_S)
    later = _show(h, UNIT)
    assert later["MainPID"] == show["MainPID"] and later["NRestarts"] == "0" and later["ActiveState"] == "active"
    assert max(s.value for s in _scrape(port).samples("pdctl_round_last_timestamp_seconds")) > first
    # the audit record of the install, in the state dir the unit pins (XDG_STATE_HOME)
    log = h.run(["cat", f"{STATE}/pdctl/audit.jsonl"]).stdout.splitlines()
    rec = json.loads(log[-1])
    assert rec["action"] == "watch --install" and rec["result"].startswith(f"installed, running as pid {doc['pid']}")
    status = _pdctl_inside(h, "watch", "--status", "-i", INV, "--json")
    assert status.returncode == 0, status.stdout + status.stderr
    checks = {c["name"]: c["status"] for c in json.loads(status.stdout)["checks"]}
    assert checks == {"service": "pass", "exporter": "pass", "rounds": "pass"}


def test_a_killed_watch_is_restarted_and_a_wedged_one_is_killed_by_the_watchdog(host):
    h, port = host["host"], host["port"]
    pid = _show(h, UNIT)["MainPID"]
    assert h.run(["kill", "-KILL", pid]).returncode == 0
    after = _wait(
        "restarted after SIGKILL",
        lambda: (
            (s := _show(h, UNIT))["NRestarts"] == "1"
            and s["ActiveState"] == "active"
            and s["MainPID"] not in ("0", pid)
            and s
        ),
    )
    _wait("the new watch's exporter answering", lambda: _scrape_ok(port))
    # a watch whose loop completes no round (stopped) stops feeding the watchdog: systemd kills and restarts it
    assert h.run(["kill", "-STOP", after["MainPID"]]).returncode == 0
    seen = _wait("the watchdog firing", lambda: (s := _show(h, UNIT))["Result"] == "watchdog" and s, timeout=30)
    assert seen["MainPID"] != after["MainPID"] or seen["SubState"] in ("auto-restart", "stop-watchdog", "stop-sigabrt")
    again = _wait(
        "restarted after the watchdog",
        lambda: (s := _show(h, UNIT))["NRestarts"] == "2" and s["ActiveState"] == "active" and s,
    )
    assert again["MainPID"] not in (pid, after["MainPID"])


def _scrape_ok(port: int) -> bool:
    try:
        return _scrape(port).value("pdctl_watch_info") == 1
    except Exception:
        return False


def test_uninstall_stops_disables_and_removes_the_unit(host):
    h, port = host["host"], host["port"]
    res = _pdctl_inside(h, "watch", "--uninstall", "-i", INV, "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["changed"] and doc["removed"][0] == f"/etc/systemd/system/{UNIT}"
    show = _show(h, UNIT)
    assert show["LoadState"] == "not-found" and show["ActiveState"] == "inactive", show
    assert h.run(["test", "-e", f"/etc/systemd/system/{UNIT}"]).returncode == 1
    assert not _scrape_ok(port)
    rec = json.loads(h.run(["cat", f"{STATE}/pdctl/audit.jsonl"]).stdout.splitlines()[-1])
    assert rec["action"] == "watch --uninstall" and rec["result"].startswith("removed (systemd)")
