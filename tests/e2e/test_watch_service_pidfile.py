"""`pdctl watch --install` without systemd (this machine's root namespace: systemd is not PID 1): the watch as a
pidfile service through the roles' PidfileManager on a local transport. Its roles are on ports nothing listens on
(failing, not unknown: the host answers); the watch runs, serves its exporter, and --uninstall stops it by pid.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import httpx
import pytest

from pdctl.checks.metrics import parse_metrics
from pdctl.services.pidfile import parse_proc_stat
from tests.e2e.helpers import kill_leftovers, local_inventory, pdctl, write_inventory
from tests.fixtures.net import free_port

pytestmark = [pytest.mark.e2e]


def _metrics(port: int):
    r = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5.0)
    assert r.status_code == 200
    return parse_metrics(r.text)


def _alive(pid: int) -> bool:
    try:
        return parse_proc_stat(Path(f"/proc/{pid}/stat").read_text()).state not in ("Z", "X")
    except (OSError, ValueError):
        return False


@pytest.fixture
def setup(tmp_path):
    if os.path.isdir("/run/systemd/system"):
        pytest.skip("systemd runs this machine: --install would write a unit (tests/e2e/test_watch_service_systemd)")
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus", "exporter")}
    inv = local_inventory("wsvc", ports)
    inv["watch"] = {"health_every": 1, "e2e_every": 3, "pairs_every": 3, "flags_every": 3, "inflight_window": 4}
    path = write_inventory(tmp_path / "inv.yaml", inv)
    try:
        yield {"inv": str(path), "state": tmp_path / "state", "port": ports["exporter"], "tmp": tmp_path}
    finally:
        kill_leftovers(tmp_path / "state")


def test_pidfile_install_runs_the_watch_and_uninstall_stops_it_by_pid(setup):
    s = setup
    listen = f"127.0.0.1:{s['port']}"
    env = {"PDCTL_AUDIT_LOG": str(s["tmp"] / "audit.jsonl")}
    plan = pdctl(
        ["watch", "--install", "-i", s["inv"], "--listen", listen, "--dry-run", "--json"], state=s["state"], env=env
    )
    assert plan.code == 0, plan.output
    assert plan.json()["changed"] and not (s["state"] / "pdctl" / "pdctl-watch-wsvc.json").exists()

    run = pdctl(["watch", "--install", "-i", s["inv"], "--listen", listen, "--json"], state=s["state"], env=env)
    assert run.code == 0, run.output
    doc = run.json()
    spec_path = s["state"] / "pdctl" / "pdctl-watch-wsvc.json"
    assert doc["manager"] == "pidfile" and doc["active"] and doc["path"] == str(spec_path)
    assert doc["exporter_answers"] and doc["stop_with"] == f"pdctl watch --uninstall -i {s['inv']}"
    pid = doc["pid"]
    assert _alive(pid)
    assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:6] == [
        sys.executable.encode(),
        b"-m",
        b"pdctl",
        b"watch",
        b"-i",
        s["inv"].encode(),
    ]
    spec = json.loads(spec_path.read_text())
    assert spec["env"]["XDG_STATE_HOME"] == str(s["state"]) and spec["env"]["PDCTL_AUDIT_LOG"] == env["PDCTL_AUDIT_LOG"]
    # its rounds run: the roles are down on a host that answers, so up but failing
    deadline = time.monotonic() + 30
    while True:
        m = _metrics(s["port"])
        if m.samples("pdctl_check_ok", layer="health"):
            break
        assert time.monotonic() < deadline, "no health round on the exporter within 30s"
        time.sleep(0.2)
    assert {x.value for x in m.samples("pdctl_target_up")} == {1.0}
    assert {x.value for x in m.samples("pdctl_check_ok", layer="health")} == {0.0}

    again = pdctl(["watch", "--install", "-i", s["inv"], "--listen", listen, "--json"], state=s["state"], env=env)
    assert again.code == 0 and not again.json()["changed"] and again.json()["pid"] == pid  # nothing to redo

    status = pdctl(["watch", "--status", "-i", s["inv"]], state=s["state"], env=env)
    assert status.code == 0, status.output
    assert status.stdout.splitlines()[0] == f"watch service pdctl-watch-wsvc: running, pid {pid}"

    roles = pdctl(["status", "-i", s["inv"], "--json"], state=s["state"], env=env)
    assert roles.code == 1 and roles.json()["watch"] == {
        "service": "pdctl-watch-wsvc",
        "manager": "pidfile",
        "state": "running",
        "pid": pid,
        "detail": "running",
    }

    gone = pdctl(["watch", "--uninstall", "-i", s["inv"], "--json"], state=s["state"], env=env)
    assert gone.code == 0, gone.output
    assert gone.json()["detail"] == f"stopped pid {pid}"
    assert not _alive(pid) and not spec_path.exists()
    # it stopped as a service should: SIGTERM, its own last words (the log is kept)
    last = (s["state"] / "pdctl" / "pdctl-watch-wsvc.log").read_text().rstrip().splitlines()[-1]
    assert last.startswith("watch stopped by SIGTERM after "), last
    after = pdctl(["watch", "--status", "-i", s["inv"], "--json"], state=s["state"], env=env)
    assert after.code == 1 and after.json()["checks"][0]["observed"] == "not installed"
    assert (
        pdctl(["status", "-i", s["inv"], "--json"], state=s["state"], env=env).json()["watch"]["state"]
        == "not installed"
    )
    actions = [json.loads(x)["action"] for x in Path(env["PDCTL_AUDIT_LOG"]).read_text().splitlines()]
    assert actions == ["watch --install", "watch --install", "watch --uninstall"]
    # history reads them as they went (they carried no exit code, and read "failed")
    failed = pdctl(["history", "--result", "failed", "--json"], state=s["state"], env=env)
    assert failed.code == 0 and failed.json()["records"] == [], failed.output
    ok = pdctl(["history", "--result", "ok", "--json"], state=s["state"], env=env).json()["records"]
    assert [r["action"] for r in ok] == actions
