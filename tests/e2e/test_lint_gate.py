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
    py.write_text(
        f'#!/bin/sh\nif [ "$1" = "-m" ]; then exec {sys.executable} {role} "$@"; fi\nexec {real_python} "$@"\n'
    )
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
    yield from _setup(tmp_path, sglang_python())


@pytest.fixture
def unlintable(tmp_path):
    """The same deployment, but the host's interpreter (pdctl's own: no sglang installed) cannot run SGLang's
    parser: the workers' command lines cannot be linted, and the gate does not refuse what it could not check."""
    yield from _setup(tmp_path, sys.executable)


@pytest.fixture
def mismatched(tmp_path):
    """Every line parses, but the pair disagrees on --page-size: SGLang would refuse only at the first transfer."""
    yield from _setup(tmp_path, sglang_python(), prefill_args={"--page-size": 32}, decode_args={"--page-size": 16})


def _setup(tmp_path: Path, lint_python: str, prefill_args: dict | None = None, decode_args: dict | None = None):
    state = tmp_path / "state"
    state.mkdir()
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap")}
    inv = {
        "name": NAME,
        "engine": "sglang",
        "model_path": "/models/DeepSeek-V4-Flash-NVFP4",
        "hosts": {
            "local": {"transport": "local", "service_manager": "pidfile", "python": _wrapper(tmp_path, lint_python)}
        },
        "roles": {
            "prefill": [
                {
                    "port": ports["prefill"],
                    "bootstrap_port": ports["bootstrap"],
                    "ready_timeout": 20,
                    "args": prefill_args or {},
                }
            ],
            "decode": [
                {"port": ports["decode"], "ready_timeout": 20, "args": decode_args or {"--cuda-graph-max-bs": 96}}
            ],  # the seed's flag: 0.5.23 refuses it
            "router": [{"port": ports["router"], "ready_timeout": 20, "args": {"--health-check-interval-secs": 2}}],
        },
    }
    try:
        yield {"inv": write_inventory(tmp_path / "inv.yaml", inv), "state": state}
    finally:
        for pid in _pids(state).values():
            try:
                os.killpg(pid, signal.SIGKILL)  # pidfile roles run under setsid: pid == process group
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
    assert _pids(state) == {} and not list((state / "pdctl").glob("*.json"))  # nothing installed or started

    forced = pdctl(["deploy", "-i", inv, "--no-verify", "--json", "--skip-lint"], state=state, timeout=180)
    assert forced.code == 0, forced.stdout + forced.stderr
    assert any("lint skipped" in w for w in json.loads(forced.stdout)["warnings"])
    before = _pids(state)
    assert len(before) == 3 and all(_alive(p) for p in before.values())

    again = pdctl(["restart", "--pair", "-i", inv, "--no-verify", "--json"], state=state, timeout=180)
    assert again.code == 2, again.stdout + again.stderr
    message = json.loads(again.stdout)["error"]["message"]
    assert "restart refused" in message and "decode[0]" in message and "0.5.23" in message
    assert _pids(state) == before and all(_alive(p) for p in before.values())  # every role kept its pid

    records = [r for r in _history(state) if r.get("result") != "started"]
    deploys = [r for r in records if r["action"] == "deploy"]
    assert [r["args"]["skip_lint"] for r in deploys] == [False, True]
    assert "LintRefused" in deploys[0]["result"]
    restart = [r for r in records if r["action"] == "restart --pair"]
    assert len(restart) == 1 and "LintRefused" in restart[0]["result"]


def test_deploy_and_restart_say_which_roles_the_gate_could_not_lint(unlintable):
    """Issue 12: the gate's lint-unavailable findings (no sglang.srt on the host) were only in the audit log; deploy
    and restart go ahead (same exit codes) and say, on screen and in --json, which roles went unchecked and why."""
    inv, state = str(unlintable["inv"]), unlintable["state"]
    deployed = pdctl(["deploy", "-i", inv, "--no-verify", "--json"], state=state, timeout=180)
    assert deployed.code == 0, deployed.output
    warned = [w for w in json.loads(deployed.stdout)["warnings"] if w.startswith("lint could not check")]
    assert [w.split()[4].split("@")[0].rstrip(":") for w in warned] == ["prefill[0]", "decode[0]"], warned
    assert all("No module named 'sglang" in w and "deploy went ahead without checking" in w for w in warned)

    again = pdctl(["restart", "--pair", "-i", inv, "--no-verify"], state=state, timeout=180)
    assert again.code == 0, again.output
    shown = [ln for ln in again.stderr.splitlines() if ln.startswith("warning: lint could not check")]
    assert len(shown) == 2 and "decode[0]" in shown[1] and "restart went ahead" in shown[1], again.stderr
    gates = [r["lint"] for r in _history(state) if r.get("result") == "ok" and "lint" in r]
    assert [g["unchecked"] for g in gates] == [2, 2] and not any(g["ok"] for g in gates)


def test_lint_and_deploy_refuse_a_pair_that_disagrees_on_the_page_size(mismatched):
    """Issue 29: both lines parse on their own; SGLang 0.5.23 refuses the pair only at the first transfer ("Both
    servers must use the same --page-size value"), so lint fails it and deploy refuses it before starting anything."""
    inv, state = str(mismatched["inv"]), mismatched["state"]
    linted = pdctl(["lint", "-i", inv, "--json"], state=state, timeout=180)
    assert linted.code == 1, linted.output
    doc = json.loads(linted.stdout)
    (f,) = [f for f in doc["findings"] if f["rule"] == "pd-mismatch"]
    assert f["blocks"] and f["subject"] == "--page-size" and doc["blocking"] == 1
    assert f["message"] == "page_size: prefill[0] has 32, decode[0] has 16"

    refused = pdctl(["deploy", "-i", inv, "--no-verify", "--json"], state=state, timeout=180)
    assert refused.code == 2, refused.output
    message = json.loads(refused.stdout)["error"]["message"]
    assert "nothing was stopped" in message and "prefill[0] has 32, decode[0] has 16" in message
    assert _pids(state) == {} and not list((state / "pdctl").glob("*.json"))  # nothing installed or started
