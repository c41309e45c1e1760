"""deploy and restart lint first: a decode flag the installed sglang 0.5.23 rejects is refused with exit 2 before
anything is installed or stopped, and every running role keeps its pid; --skip-lint overrides it, audited.

The roles cannot be real SGLang servers here (no GPU), so the host's interpreter is a wrapper: `-m MODULE ...` (how
pdctl launches a role) runs a tiny HTTP server answering every readiness probe with 200; anything else (`-c`, the
lint probe) is the real sglang venv's python, so the verdict is the real parser's.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.e2e.helpers import pdctl, write_inventory
from tests.e2e.test_deploy_identity import FAKE_ROLE
from tests.fixtures.net import free_port
from tests.fixtures.sglang_venv import sglang_python

pytestmark = [pytest.mark.e2e]

NAME = "lintgate"


def _wrapper(tmp: Path, real_python: str) -> str:
    role = tmp / "fake_role.py"
    role.write_text(FAKE_ROLE)
    py = tmp / "python"
    py.write_text(f'#!/bin/sh\nif [ "$1" = "-m" ]; then exec {sys.executable} {role} "$@"; fi\n'
                  f'exec {real_python} "$@"\n')
    py.chmod(0o755)
    return str(py)


def _pids(state: Path) -> dict[str, int]:
    return {p.stem: json.loads(p.read_text())["pid"] for p in sorted((state / "pdctl").glob("*.pid"))}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


@pytest.fixture
def setup(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap")}
    inv = {
        "name": NAME, "engine": "sglang", "model_path": "/models/DeepSeek-V4-Flash-NVFP4",
        "hosts": {"local": {"transport": "local", "service_manager": "pidfile",
                            "python": _wrapper(tmp_path, sglang_python())}},
        "roles": {
            "prefill": [{"port": ports["prefill"], "bootstrap_port": ports["bootstrap"], "ready_timeout": 20}],
            "decode": [{"port": ports["decode"], "ready_timeout": 20,
                        "args": {"--cuda-graph-max-bs": 96}}],     # the seed's flag: 0.5.23 refuses it
            "router": [{"port": ports["router"], "ready_timeout": 20, "args": {"--health-check-interval-secs": 2}}],
        },
    }
    try:
        yield {"inv": write_inventory(tmp_path / "inv.yaml", inv), "state": state}
    finally:
        for pid in _pids(state).values():
            try:
                os.killpg(pid, signal.SIGKILL)     # pidfile roles run under setsid: pid == process group
            except (ProcessLookupError, PermissionError):
                pass


def _history(state: Path) -> list[dict]:
    run = pdctl(["history", "--json"], state=state, timeout=60)
    doc = json.loads(run.stdout)
    return doc["records"] if isinstance(doc, dict) else doc


def test_deploy_and_restart_refuse_a_flag_the_installed_sglang_rejects(setup):
    inv, state = str(setup["inv"]), setup["state"]
    refused = pdctl(["deploy", "-i", inv, "--no-verify", "--json"], state=state, timeout=180)
    assert refused.code == 2, refused.stdout + refused.stderr
    err = json.loads(refused.stdout)["error"]
    assert err["kind"] == "usage" and "nothing was stopped" in err["message"]
    assert "--cuda-graph-max-bs-decode" in err["message"] and "--skip-lint" in err["hint"]
    assert _pids(state) == {} and not list((state / "pdctl").glob("*.json"))   # nothing installed or started

    forced = pdctl(["deploy", "-i", inv, "--no-verify", "--json", "--skip-lint"], state=state, timeout=180)
    assert forced.code == 0, forced.stdout + forced.stderr
    assert any("lint skipped" in w for w in json.loads(forced.stdout)["warnings"])
    before = _pids(state)
    assert len(before) == 3 and all(_alive(p) for p in before.values())

    again = pdctl(["restart", "--pair", "-i", inv, "--no-verify", "--json"], state=state, timeout=180)
    assert again.code == 2, again.stdout + again.stderr
    message = json.loads(again.stdout)["error"]["message"]
    assert "restart refused" in message and "decode[0]" in message and "0.5.23" in message
    assert _pids(state) == before and all(_alive(p) for p in before.values())   # every role kept its pid

    records = [r for r in _history(state) if r.get("result") != "started"]
    deploys = [r for r in records if r["action"] == "deploy"]
    assert [r["args"]["skip_lint"] for r in deploys] == [False, True]
    assert "LintRefused" in deploys[0]["result"]
    restart = [r for r in records if r["action"] == "restart --pair"]
    assert len(restart) == 1 and "LintRefused" in restart[0]["result"]
