"""The interpreter is part of the deployment, not of the environment pdctl runs from (issue 10, item 7).

A deployment is made by `pdctl deploy` under this interpreter; then pdctl is run from a second virtualenv (made
with --system-site-packages, so its `python` is another path with the same packages): the plan has nothing to
change and a real deploy restarts nothing. The inventory declares no `python`, so the interpreter is resolved, not
given. The roles are cheap: the host's workdir holds a tiny `engine.launch_server` and `sglang_router.launch_router`
(python -m finds them in the cwd first) that answer every readiness probe with 200, so the real deploy path runs
(install, start, readiness gates) without the engine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.helpers import REPO, local_inventory, write_inventory
from tests.fixtures.net import free_port

pytestmark = [pytest.mark.e2e]

NAME = "identity"

# Answers 200 to every GET on --port (and on --disaggregation-bootstrap-port, for prefill); the router's
# /readiness gets {"status": "ready"}.
FAKE_ROLE = """
import json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"status": "ready"}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass

def port_after(flag):
    return int(sys.argv[sys.argv.index(flag) + 1]) if flag in sys.argv else None

servers = [ThreadingHTTPServer(("127.0.0.1", p), H)
           for p in (port_after("--port"), port_after("--disaggregation-bootstrap-port")) if p]
for s in servers[1:]:
    threading.Thread(target=s.serve_forever, daemon=True).start()
servers[0].serve_forever()
"""


def _fake_roles(workdir: Path) -> None:
    for pkg, mod in (("engine", "launch_server"), ("sglang_router", "launch_router")):
        (workdir / pkg).mkdir(parents=True)
        (workdir / pkg / "__init__.py").write_text("")
        (workdir / pkg / f"{mod}.py").write_text(FAKE_ROLE)


def _pdctl(python: str, args: list[str], state: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_STATE_HOME": str(state), "COLUMNS": "200", "PDCTL_OPERATOR": "test-operator"}
    return subprocess.run(
        [python, "-m", "pdctl", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )


def _pids(state: Path) -> dict[str, int]:
    return {p.stem: json.loads(p.read_text())["pid"] for p in sorted((state / "pdctl").glob("*.pid"))}


def _kill_roles(state: Path) -> None:
    for pid in _pids(state).values():
        try:
            os.killpg(pid, signal.SIGKILL)  # pidfile roles run under setsid: pid == process group
        except (ProcessLookupError, PermissionError):
            pass


@pytest.fixture
def deployment(tmp_path):
    workdir, state = tmp_path / "work", tmp_path / "state"
    _fake_roles(workdir)
    state.mkdir()
    venv = tmp_path / "venv2"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True, timeout=60
    )
    second = str(venv / "bin" / "python")
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory(
        NAME, ports, host={"transport": "local", "service_manager": "pidfile", "workdir": str(workdir)}
    )
    for role in ("prefill", "decode", "router"):
        inv["roles"][role][0]["ready_timeout"] = 20
    path = write_inventory(tmp_path / "inv.yaml", inv)
    try:
        first = _pdctl(sys.executable, ["deploy", "-i", str(path), "--no-verify", "--json"], state)
        assert first.returncode == 0, first.stdout + first.stderr
        yield {"inv": path, "state": state, "second": second, "data": inv, "tmp": tmp_path}
    finally:
        _kill_roles(state)


def test_a_plan_from_another_virtualenv_has_nothing_to_change(deployment):
    st = deployment["state"]
    specs = [json.loads(p.read_text()) for p in (st / "pdctl").glob(f"pdctl-{NAME}-*.json")]
    assert len(specs) == 3 and {s["argv"][0] for s in specs} == {sys.executable}  # the first deploy's interpreter
    assert deployment["second"] != sys.executable
    plan = _pdctl(deployment["second"], ["deploy", "-i", str(deployment["inv"]), "--dry-run", "--json"], st)
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)["plan"]
    assert doc["action"] == "none", doc
    for r in doc["roles"]:
        assert not r["changed"] and r["changes"] == [] and r["running"], r
        assert r["argv"][0] == sys.executable and r["python"] == sys.executable
        assert r["python_source"] == "installed"
    assert "read on the hosts" in doc["from_hosts"]


def test_a_deploy_from_another_virtualenv_restarts_nothing(deployment):
    st = deployment["state"]
    before = _pids(st)
    assert len(before) == 3
    run = _pdctl(deployment["second"], ["deploy", "-i", str(deployment["inv"]), "--no-verify", "--json"], st)
    assert run.returncode == 0, run.stdout + run.stderr
    doc = json.loads(run.stdout)
    assert doc["plan"]["action"] == "none" and doc["steps"] == []
    assert _pids(st) == before
    for p in (st / "pdctl").glob(f"pdctl-{NAME}-*.json"):
        assert json.loads(p.read_text())["argv"][0] == sys.executable


def test_an_interpreter_declared_in_the_inventory_is_the_way_to_change_it(deployment):
    inv = deployment["data"]
    inv["hosts"]["local"]["python"] = deployment["second"]
    path = write_inventory(deployment["tmp"] / "inv-declared.yaml", inv)
    plan = _pdctl(sys.executable, ["deploy", "-i", str(path), "--dry-run", "--json"], deployment["state"])
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)["plan"]
    assert doc["action"] == "co-restart"
    for r in doc["roles"]:
        assert r["python_source"] == "inventory" and r["argv"][0] == deployment["second"]
        assert f"command: -{sys.executable} +{deployment['second']}" in r["changes"]
