"""The CLI contract's engine cells (issue 10): ok, check failed and interrupted, against one real local deployment of
the bundled engine on free ports. Every cell asserts the exit code and that stdout is exactly one JSON document of
the expected shape. The usage / unreachable / refused / role-down-behind-a-tunnel cells are in test_cli_contract.py.

| outcome                          | exit | stdout under --json                                                        |
|----------------------------------|------|----------------------------------------------------------------------------|
| ok (read commands, dry runs)     | 0    | the command's own document (`"ok": true` where it has one)                 |
| check failed (a drifted flag)    | 1    | final-health's report, `"ok": false`, the failed flag with expected/found  |
| refused (hazard: decode alone)   | 4    | {"ok": false, "error": {"exit_code": 4, "kind": "refused", ...}}, no pid  |
|                                  |      | changed                                                                    |
| interrupted (SIGINT, inflight,   | 130  | the partial report (`"partial": true`, `"ok": false`): inflight and triage |
|  triage)                         |      | judge what they gathered instead of printing an error document             |
| interrupted (SIGINT,             | 130  | {"ok": false, "error": {"exit_code": 130, "kind": "interrupted", ...}}    |
|  final-health)                   |      |                                                                            |
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.e2e.helpers import REPO, local_inventory, pdctl, write_inventory
from tests.engine.test_storm_engine import _kill_leftovers
from tests.fixtures.net import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

FLAG = "--cuda-graph-max-bs-decode"
WINDOW = ["--window", "2", "--interval", "1"]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    state = tmp_path_factory.mktemp("contract-engine-state")
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory("contract-engine", ports, decode_args={FLAG: 96})
    path = write_inventory(state / "inv.yaml", inv)
    try:
        r = pdctl(["deploy", "-i", str(path), "--no-verify", "--json"], state=state, timeout=400)
        assert r.code == 0, r.output
        yield {"state": state, "inv": path, "data": inv}
    finally:
        pdctl(["down", "-i", str(path)], state=state, timeout=120)
        _kill_leftovers(state)


def _doc(r) -> dict:
    assert "Traceback" not in r.output, r.output
    doc = json.loads(r.stdout)  # raises unless stdout is exactly one JSON document
    assert isinstance(doc, dict), doc
    return doc


def _run(deployment, *args: str, timeout: float = 60):
    return pdctl([*args, "-i", str(deployment["inv"]), "--json"], state=deployment["state"], timeout=timeout)


def test_ok_final_health(deployment):
    r = _run(deployment, "verify", "final-health")
    assert r.code == 0, r.output
    doc = _doc(r)
    assert doc["ok"] is True and doc["inventory"] == "contract-engine"
    assert {"health", "e2e", "flags"} <= set(doc["layers"]), doc["layers"].keys()
    assert all(c["status"] != "fail" for cs in doc["layers"].values() for c in cs), doc


def test_ok_status(deployment):
    r = _run(deployment, "status")
    assert r.code == 0, r.output
    doc = _doc(r)
    assert doc["inventory"] == "contract-engine" and isinstance(doc["hazards"], list)
    assert len(doc["roles"]) == 3, doc["roles"]


def test_ok_inflight(deployment):
    r = _run(deployment, "verify", "inflight", *WINDOW)
    assert r.code == 0, r.output
    doc = _doc(r)
    assert doc["ok"] is True and doc["partial"] is False and doc["verdict"] in ("drained", "busy"), doc
    assert len(doc["samples"]) >= 2


def test_ok_triage(deployment):
    r = _run(deployment, "triage", *WINDOW)
    assert r.code == 0, r.output
    doc = _doc(r)
    assert doc["ok"] is True and doc["partial"] is False and doc["inventory"] == "contract-engine", doc
    assert isinstance(doc["findings"], list) and doc["headline"]


def test_ok_history(deployment):
    r = pdctl(["history", "--json"], state=deployment["state"], timeout=60)
    assert r.code == 0, r.output
    doc = _doc(r)
    assert doc["log"].startswith(str(deployment["state"])), doc["log"]
    assert any("deploy" in json.dumps(rec) for rec in doc["records"]), doc["records"]


def test_ok_render(deployment):
    r = _run(deployment, "render")
    assert r.code == 0, r.output
    doc = _doc(r)
    assert doc["ok"] is True and doc["offline"] is True
    assert doc["inventory"] == str(deployment["inv"])  # render names the file it rendered
    assert FLAG in json.dumps(doc["roles"]), doc["roles"]


def test_ok_restart_pair_dry_run(deployment):
    r = _run(deployment, "restart", "--pair", "--dry-run")
    assert r.code == 0, r.output
    doc = _doc(r)
    assert doc["ok"] is True and doc["dry_run"] is True, doc
    assert list(doc["roles"]) == ["prefill", "decode", "router"] and doc["plan"], doc


def test_check_failed_drifted_flag(deployment, tmp_path):
    data = {**deployment["data"], "roles": {**deployment["data"]["roles"]}}
    data["roles"]["decode"] = [{**data["roles"]["decode"][0], "args": {FLAG: 64}}]  # the live process has 96
    drifted = write_inventory(tmp_path / "drifted.yaml", data)
    r = pdctl(
        ["verify", "final-health", "-i", str(drifted), "--json", "--layer", "flags"],
        state=deployment["state"],
        timeout=60,
    )
    assert r.code == 1, r.output
    doc = _doc(r)
    assert doc["ok"] is False and "error" not in doc, doc
    failed = [c for c in doc["layers"]["flags"] if c["status"] == "fail"]
    assert failed and all(FLAG in json.dumps(c) for c in failed), doc["layers"]["flags"]
    text = json.dumps(failed)
    assert "64" in text and "96" in text, failed


def test_refused_restart_decode_alone_under_a_running_prefill(deployment):
    """The hazard guard refuses under the lock, before anything is stopped: every pid stays."""

    def pids():
        return {row["label"]: row["pid"] for row in _doc(_run(deployment, "status"))["roles"]}

    before = pids()
    r = _run(deployment, "restart", "--role", "decode", "--no-verify")
    assert r.code == 4, r.output
    doc = _doc(r)
    assert doc["ok"] is False and doc["error"]["kind"] == "refused" and doc["error"]["exit_code"] == 4, doc
    assert "degraded" in doc["error"]["message"] and "restart --pair" in doc["error"]["hint"]
    assert pids() == before


def _interrupted(deployment, args: list[str]) -> tuple[int, str, str]:
    """`pdctl ARGS --json` sent SIGINT 3 s in (past start-up, well inside its 30 s window): (exit, stdout, stderr)."""
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(deployment["state"]),
        "COLUMNS": "200",
        "PDCTL_OPERATOR": "test-operator",
    }
    p = subprocess.Popen(
        [sys.executable, "-m", "pdctl", *args, "-i", str(deployment["inv"]), "--json"],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        time.sleep(3)
        assert p.poll() is None, p.communicate()
        started = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=15)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert time.monotonic() - started < 10  # stopped by the signal, not by the end of the window
    assert "Traceback" not in out + err, err
    return p.returncode, out, err


def test_interrupted_inflight(deployment):
    code, out, err = _interrupted(deployment, ["verify", "inflight", "--window", "30", "--interval", "1"])
    assert code == 130, (code, out, err)
    doc = json.loads(out)
    assert isinstance(doc, dict)
    # inflight judges the partial series rather than printing {"ok": false, "error": {"kind": "interrupted"}}
    assert doc["ok"] is False and doc["partial"] is True and "error" not in doc, doc
    assert any("interrupted" in n for n in doc["notes"]), doc["notes"]
    assert 1 <= len(doc["samples"]) < 30, doc["samples"]


#: final-health's optional inflight layer samples 30 s (INFLIGHT_WINDOW_S); triage is given a 30 s window
INTERRUPTIBLE = {
    "final-health": ["verify", "final-health", "--layer", "inflight"],
    "triage": ["triage", "--window", "30", "--interval", "1"],
}


@pytest.mark.parametrize("name", INTERRUPTIBLE, ids=str)
def test_interrupted_json_is_one_document_exit_130(deployment, name):
    code, out, err = _interrupted(deployment, INTERRUPTIBLE[name])
    assert code == 130, (code, out, err)
    doc = json.loads(out)  # raises unless stdout is exactly one JSON document
    assert isinstance(doc, dict), doc
    if name == "final-health":  # an interrupted window is no verdict: the error document
        assert doc["ok"] is False and doc["error"]["kind"] == "interrupted" and doc["error"]["exit_code"] == 130
        assert "SIGINT" in doc["error"]["message"]
    else:  # triage, like inflight, judges what it gathered, marked partial
        assert doc["ok"] is False and doc["partial"] is True and "error" not in doc, doc
        assert "INTERRUPTED" in doc["headline"], doc
