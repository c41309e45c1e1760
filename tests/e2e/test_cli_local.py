"""pdctl end to end on this machine: real engine processes, the real sglang-router, the real CLI in a subprocess.

One deployment per module (ports picked free), driven through deploy -> verify -> restart --pair -> verify, drift,
lineage, lock contention and secret masking. Every server is stopped by `pdctl down` and, failing that, by pid.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.e2e.helpers import layer, local_inventory, pdctl, statuses, write_inventory
from tests.fixtures.net import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

SECRET = "hf_e2e_do_not_print_4f9a"


def _kill_leftovers(state):
    """Last resort: SIGKILL every pid pdctl's pidfile manager recorded under this test's state dir."""
    for pidfile in state.rglob("*.pid"):
        try:
            pid = (
                int(json.loads(pidfile.read_text())["pid"])
                if pidfile.read_text().strip().startswith("{")
                else int(pidfile.read_text().split()[0])
            )
            os.killpg(pid, signal.SIGKILL)
        except (ValueError, KeyError, ProcessLookupError, PermissionError, IndexError):
            pass


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    state = tmp_path_factory.mktemp("state")
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory(
        "e2e",
        ports,
        decode_args={"--cuda-graph-max-bs-decode": 96, "--disable-overlap-schedule": True},
        decode_env={"SGLANG_OPT_USE_MULTI_STREAM_OVERLAP": "0", "HF_TOKEN": SECRET},
    )
    path = write_inventory(state / "inv.yaml", inv)
    try:
        r = pdctl(["deploy", "-i", str(path), "--json"], state=state)
        assert r.code == 0, r.output
        yield {"state": state, "inv": path, "data": inv, "deploy": r}
    finally:
        pdctl(["down", "-i", str(path)], state=state, timeout=120)
        _kill_leftovers(state)


def test_deploy_started_all_roles_in_order_and_passed_final_health(deployment):
    doc = deployment["deploy"].json()
    assert doc["ok"] is True
    assert doc["plan"]["action"] == "co-restart"
    order = [s["step"].split()[1].split("[")[0] for s in doc["steps"] if s["step"].startswith(("restart", "start"))]
    assert order == ["prefill", "decode", "router"]
    fh = doc["final_health"]
    for name in ("health", "e2e", "transfer", "flags", "lineage"):
        assert statuses(fh, name) <= {"pass", "skip", "warn"}, (name, layer(fh, name))


def test_redeploy_with_nothing_changed_restarts_nothing(deployment):
    st = deployment["state"]
    before = pdctl(["status", "-i", str(deployment["inv"]), "--json"], state=st).json()
    r = pdctl(["deploy", "-i", str(deployment["inv"]), "--json"], state=st)
    assert r.code == 0, r.output
    assert r.json()["plan"]["action"] == "none"
    after = pdctl(["status", "-i", str(deployment["inv"]), "--json"], state=st).json()
    assert [x["pid"] for x in before["roles"]] == [x["pid"] for x in after["roles"]]


def test_final_health_json_has_every_layer_and_seed_flags(deployment):
    r = pdctl(["verify", "final-health", "-i", str(deployment["inv"]), "--json"], state=deployment["state"])
    assert r.code == 0, r.output
    doc = r.json()
    assert set(doc["layers"]) == {"health", "e2e", "transfer", "flags", "lineage"}
    names = {x["name"] for x in layer(doc, "flags") if x["target"].startswith("decode")}
    assert "--disable-overlap-schedule" in names and "env:SGLANG_OPT_USE_MULTI_STREAM_OVERLAP" in names
    # the pair's /server_info documents agree on what the KV transfer needs (the engine's page size: its default)
    (pair,) = [x for x in layer(doc, "flags") if x["target"] == "prefill[0] / decode[0]"]
    assert pair["status"] == "pass" and pair["detail"] == (
        "prefill/decode agree on model, tokenizer, page size, kv cache dtype, dtype, transfer backend"
    )


def test_drift_in_env_or_flag_fails_layer_4_with_expected_vs_found(deployment, tmp_path):
    data = json.loads(json.dumps(deployment["data"]))
    data["roles"]["decode"][0]["env"]["SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"] = "1"
    data["roles"]["decode"][0]["args"]["--cuda-graph-max-bs-decode"] = 64
    del data["roles"]["decode"][0]["args"]["--disable-overlap-schedule"]  # live process still has it
    drifted = write_inventory(tmp_path / "drifted.yaml", data)
    r = pdctl(["verify", "final-health", "-i", str(drifted), "--json", "--layer", "flags"], state=deployment["state"])
    assert r.code == 1, r.output
    bad = {x["name"]: x for x in layer(r.json(), "flags") if x["status"] == "fail"}
    assert bad["env:SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"]["expected"] == "1"
    assert bad["env:SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"]["observed"] == "0"
    assert (
        "64" in bad["--cuda-graph-max-bs-decode"]["expected"] and "96" in bad["--cuda-graph-max-bs-decode"]["observed"]
    )
    assert bad["--disable-overlap-schedule"]["expected"] == "not in the inventory"
    assert {x["target"].split("[")[0] for x in bad.values()} == {"decode"}  # prefill and router show no drift


def test_lock_contention_refuses_and_names_the_holder(deployment, monkeypatch):
    from pdctl.inventory import load_inventory
    from pdctl.ops.context import Deployment, deployment_lock

    monkeypatch.setenv("XDG_STATE_HOME", str(deployment["state"]))
    with Deployment(load_inventory(deployment["inv"])) as dep, deployment_lock(dep, "test holds the lock"):
        r = pdctl(["restart", "--pair", "-i", str(deployment["inv"])], state=deployment["state"])
    assert r.code == 4, r.output
    assert "test holds the lock" in r.stderr and "held by" in r.stderr


def test_decode_alone_is_refused_then_flagged_then_cleared_by_pair_restart(deployment):
    st, inv = deployment["state"], str(deployment["inv"])
    refused = pdctl(["restart", "--role", "decode", "-i", inv], state=st)
    assert refused.code == 4, refused.output
    assert "degraded" in refused.stderr
    last = json.loads((st / "pdctl" / "audit.jsonl").read_text().splitlines()[-1])
    assert last["action"] == "restart --role decode" and last["result"].startswith("HazardRefused")

    forced = pdctl(["restart", "--role", "decode", "--override-hazard", "-i", inv, "--no-verify"], state=st)
    assert forced.code == 0, forced.output
    flagged = pdctl(["verify", "final-health", "-i", inv, "--json", "--layer", "lineage"], state=st)
    assert flagged.code == 1, flagged.output
    fails = [x for x in layer(flagged.json(), "lineage") if x["status"] == "fail"]
    assert fails and "restart --pair" in fails[0]["detail"]

    pair = pdctl(["restart", "--pair", "-i", inv, "--json"], state=st)
    assert pair.code == 0, pair.output
    steps = [s["step"] for s in pair.json()["steps"]]
    # the decode waits stopped while the prefill restarts, then starts: started in the order prefill, decode, router
    assert steps[0].startswith("stop decode[0]")
    assert [s.split()[1].split("[")[0] for s in steps if s.startswith(("restart", "start"))] == [
        "prefill",
        "decode",
        "router",
    ]
    clean = pdctl(["verify", "final-health", "-i", inv, "--json"], state=st)
    assert clean.code == 0, clean.output
    assert "fail" not in statuses(clean.json(), "lineage")


def test_secret_env_value_never_appears_in_any_output(deployment):
    st, inv = deployment["state"], str(deployment["inv"])
    outputs = [
        deployment["deploy"].output,
        pdctl(["verify", "final-health", "-i", inv], state=st).output,
        pdctl(["verify", "final-health", "-i", inv, "--json"], state=st).output,
        pdctl(["deploy", "--dry-run", "-i", inv], state=st).output,
        pdctl(["status", "-i", inv, "--json"], state=st).output,
        pdctl(["logs", "decode", "-i", inv], state=st).output,
    ]
    audit_log = (st / "pdctl" / "audit.jsonl").read_text()
    for text in outputs + [audit_log]:
        assert SECRET not in text
    assert "HF_TOKEN" in outputs[2]  # the variable is checked and shown, only its value is masked


def test_dry_run_deploy_of_a_changed_inventory_shows_the_change_and_changes_nothing(deployment, tmp_path):
    st = deployment["state"]
    data = json.loads(json.dumps(deployment["data"]))
    data["roles"]["decode"][0]["args"]["--cuda-graph-max-bs-decode"] = 64
    changed = write_inventory(tmp_path / "changed.yaml", data)
    before = pdctl(["status", "-i", str(deployment["inv"]), "--json"], state=st).json()
    r = pdctl(["deploy", "--dry-run", "-i", str(changed), "--json"], state=st)
    assert r.code == 0, r.output
    plan = r.json()["plan"]
    assert plan["action"] == "co-restart"
    decode = next(x for x in plan["roles"] if x["role"] == "decode")
    assert decode["changed"] and any("-96" in c and "+64" in c for c in decode["changes"])
    assert not any(x["changed"] for x in plan["roles"] if x["role"] != "decode")
    after = pdctl(["status", "-i", str(deployment["inv"]), "--json"], state=st).json()
    assert [x["pid"] for x in before["roles"]] == [x["pid"] for x in after["roles"]]


def test_inflight_layer_runs_only_when_named_and_an_idle_pair_is_drained(deployment):
    r = pdctl(
        ["verify", "final-health", "-i", str(deployment["inv"]), "--json", "--layer", "inflight"],
        state=deployment["state"],
    )
    assert r.code == 0, r.output
    doc = r.json()
    assert list(doc["layers"]) == ["inflight"]
    assert statuses(doc, "inflight") == {"pass"}


def test_transfer_baseline_record_then_compare(deployment, tmp_path):
    st, inv = deployment["state"], str(deployment["inv"])
    rec = pdctl(["verify", "final-health", "-i", inv, "--layer", "transfer", "--record-baseline", "--json"], state=st)
    assert rec.code == 0, rec.output
    since = pdctl(
        ["verify", "final-health", "-i", inv, "--layer", "e2e", "--layer", "transfer", "--since-baseline", "--json"],
        state=st,
    )
    assert since.code == 0, since.output
    data = json.loads(json.dumps(deployment["data"]))
    data["name"] = "never-recorded"
    other = write_inventory(tmp_path / "other.yaml", data)
    missing = pdctl(["verify", "final-health", "-i", str(other), "--layer", "transfer", "--since-baseline"], state=st)
    assert missing.code == 2 and "record-baseline" in missing.output
