"""Every shipped playbook against a real bundled-engine deployment (real engine processes, the real sglang-router,
the real CLI in a subprocess), with the engine's drills producing the failing runs:

- final-health and co-restart pass on a clean deployment; final-health fails (exit 1) on drift;
- two playbook runs at once leave one valid audit line each;
- deploy-fix onto a build with the status-update-race drill stops at the storm (pinned/not drained, exit 1) and never
  runs final-health; abort-storm-ab fails on that build and passes after deploy-fix puts the clean build back;
- stall-triage, with the degraded-bootstrap drill and a decode-only restart, ends in the co-restart recommendation
  (exit 1); with --apply it co-restarts and passes.
One deployment for the module (free ports, state in a temp dir), stopped by `pdctl down` and, failing that, by pid.
The three inventories share the services; each test first deploys the build it needs (a no-op when it is already
running), so any test runs alone or in any order.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from tests.e2e.helpers import REPO, local_inventory, pdctl, write_inventory
from tests.e2e.test_cli_local import _kill_leftovers
from tests.fixtures.net import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

SECRET = "hf_playbook_secret_7c21"
SMALL_STORM = [
    "--var",
    "storm_requests=6",
    "--var",
    "storm_prompt_tokens=3000",
    "--var",
    "storm_watch_s=8",
    "--var",
    "storm_sample_every_s=2",
]


@pytest.fixture(scope="module")
def dep(tmp_path_factory):
    state = tmp_path_factory.mktemp("pb-state")
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    # the seed's router: the abort-storm playbooks need a router that passes a client's disconnect on to the
    # workers, which smg 1.13 does not (docs/storm-and-triage.md)
    clean = local_inventory(
        "pb",
        ports,
        decode_args={"--disable-overlap-schedule": True},
        decode_env={"SGLANG_OPT_USE_MULTI_STREAM_OVERLAP": "0", "HF_TOKEN": SECRET},
        router_kind="sglang-router",
    )
    paths = {"clean": write_inventory(state / "clean.yaml", clean)}
    storm_drill = copy.deepcopy(clean)
    for role in ("prefill", "decode"):
        storm_drill["roles"][role][0]["env"]["PDCTL_DRILLS"] = "status-update-race,transfer-delay-ms=300"
    paths["storm-drill"] = write_inventory(state / "storm-drill.yaml", storm_drill)
    degraded = copy.deepcopy(clean)
    degraded["roles"]["prefill"][0]["env"]["PDCTL_DRILLS"] = "degraded-bootstrap"
    degraded["roles"]["decode"][0]["env"]["SGLANG_DISAGGREGATION_WAITING_TIMEOUT"] = "3"
    paths["degraded"] = write_inventory(state / "degraded.yaml", degraded)
    try:
        r = pdctl(["deploy", "-i", str(paths["clean"]), "--no-verify"], state=state)
        assert r.code == 0, r.output
        yield {"state": state, **{k: str(v) for k, v in paths.items()}, "data": clean}
    finally:
        for p in paths.values():
            pdctl(["down", "-i", str(p)], state=state, timeout=120)
        _kill_leftovers(state)


def run(dep, *args, timeout=400):
    return pdctl(["run", *args], state=dep["state"], timeout=timeout)


def use_build(dep, which: str, *, fresh: bool = False) -> None:
    """Deploy the inventory `which` (clean, storm-drill, degraded); nothing restarts when it is already running.
    fresh: also co-restart if an earlier test left transfer failures (a storm's aborts) or a decode-only restart in
    the lineage, so that a passing final-health is expected."""
    st, inv = dep["state"], dep[which]
    r = pdctl(["deploy", "-i", inv, "--no-verify"], state=st)
    assert r.code == 0, r.output
    if (
        fresh
        and pdctl(["verify", "final-health", "-i", inv, "--layer", "transfer", "--layer", "lineage"], state=st).code
        != 0
    ):
        r = pdctl(["restart", "--pair", "--no-verify", "-i", inv], state=st)
        assert r.code == 0, r.output


def audit(dep) -> list[dict]:
    return [json.loads(line) for line in (dep["state"] / "pdctl" / "audit.jsonl").read_text().splitlines()]


def test_final_health_playbook_passes_on_a_clean_deployment(dep):
    use_build(dep, "clean", fresh=True)
    r = run(dep, "final-health", "-i", dep["clean"], "--json")
    assert r.code == 0, r.output
    doc = r.json()
    assert [s["status"] for s in doc["steps"]] == ["passed", "passed"]
    assert set(doc["final_health"]["layers"]) == {"transfer", "flags", "lineage"}
    human = run(dep, "final-health", "-i", dep["clean"])
    assert human.code == 0 and "playbook final-health: PASS" in human.stdout and "plan" in human.stdout
    for title in (
        "1. component health",
        "2. end-to-end probe",
        "3. KV transfer",
        "4. live flags",
        "5. restart lineage",
    ):
        assert title in human.stdout, title  # every layer's table, those of step 1 too
    assert "--layer health --layer e2e" in human.stdout and "gate: ok" in human.stderr


def test_final_health_playbook_fails_on_drift_with_exit_1(dep, tmp_path):
    use_build(dep, "clean")
    data = copy.deepcopy(dep["data"])
    data["roles"]["decode"][0]["env"]["SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"] = "1"
    drifted = write_inventory(tmp_path / "drifted.yaml", data)
    r = run(dep, "final-health", "-i", str(drifted), "--json")
    assert r.code == 1, r.output
    doc = r.json()
    assert doc["failed_step"] == "transfers-and-config"
    assert "flags" in doc["steps"][1]["gate"]


def test_co_restart_playbook_restarts_in_order_and_audits_a_masked_snapshot(dep):
    use_build(dep, "clean")
    before = pdctl(["status", "-i", dep["clean"], "--json"], state=dep["state"]).json()
    r = run(dep, "co-restart", "-i", dep["clean"], "--json")
    assert r.code == 0, r.output
    after = pdctl(["status", "-i", dep["clean"], "--json"], state=dep["state"]).json()
    assert all(a["pid"] != b["pid"] for a, b in zip(after["roles"], before["roles"]))
    rec = [x for x in audit(dep) if x.get("action") == "run co-restart"][-1]
    assert rec["result"] == "ok" and [s["status"] for s in rec["steps"]] == ["passed", "passed"]
    flags = rec["final_health"]["layers"]["flags"]
    assert any(x["name"] == "env:HF_TOKEN" for x in flags)
    assert any(x.get("action") == "restart --pair" for x in audit(dep))  # the op's own record too
    assert SECRET not in (dep["state"] / "pdctl" / "audit.jsonl").read_text() and SECRET not in r.output


def test_two_playbook_runs_at_once_leave_one_valid_audit_line_each(dep):
    use_build(dep, "clean", fresh=True)
    n = len(audit(dep))
    cmd = [sys.executable, "-m", "pdctl", "run", "final-health", "-i", dep["clean"], "--json"]
    env = {"XDG_STATE_HOME": str(dep["state"]), "PDCTL_OPERATOR": "parallel", "COLUMNS": "200"}
    import os

    procs = [
        subprocess.Popen(
            cmd, cwd=REPO, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    recs = audit(dep)  # every line parses
    assert [x["action"] for x in recs[n:]] == ["run final-health", "run final-health"]


def test_deploy_fix_onto_the_racy_build_stops_at_the_storm(dep):
    use_build(dep, "clean")  # deploy-fix itself deploys the racy build
    r = run(dep, "deploy-fix", "-i", dep["storm-drill"], "--json", *SMALL_STORM)
    assert r.code == 1, r.output
    doc = r.json()
    assert [s["status"] for s in doc["steps"]] == ["passed", "passed", "passed", "failed", "not run", "not run"]
    assert doc["steps"][3]["result"]["verdict"] in ("pinned", "not-drained")


def test_abort_storm_ab_fails_on_the_racy_build(dep):
    use_build(dep, "storm-drill")
    r = run(dep, "abort-storm-ab", "-i", dep["storm-drill"], "--json", *SMALL_STORM)
    assert r.code == 1, r.output
    doc = r.json()
    assert doc["failed_step"] == "storm" and doc["steps"][1]["result"]["verdict"] != "drained"


def test_deploy_fix_back_to_the_clean_build_passes_and_abort_storm_ab_passes(dep):
    use_build(dep, "storm-drill")  # deploy-fix puts the clean build back
    r = run(dep, "deploy-fix", "-i", dep["clean"], "--json", *SMALL_STORM)
    assert r.code == 0, r.output
    assert [s["status"] for s in r.json()["steps"]] == ["passed"] * 6
    r = run(dep, "abort-storm-ab", "-i", dep["clean"], "--json", *SMALL_STORM)
    assert r.code == 0, r.output
    assert r.json()["steps"][1]["result"]["verdict"] == "drained"


def test_stall_triage_recommends_then_applies_the_co_restart(dep):
    st, inv = dep["state"], dep["degraded"]
    use_build(dep, "degraded")
    for _ in range(2):
        r = pdctl(["restart", "--role", "decode", "--override-hazard", "--no-verify", "-i", inv], state=st)
        assert r.code == 0, r.output
    pdctl(["verify", "final-health", "-i", inv, "--layer", "e2e"], state=st)  # a request hits the bad bootstrap
    r = run(dep, "stall-triage", "-i", inv, "--json")
    assert r.code == 1, r.output
    doc = r.json()
    assert [s["status"] for s in doc["steps"]] == ["failed", "skipped", "skipped"]
    assert doc["steps"][0]["summary"].startswith("triage: ACTION NEEDED")  # pdctl triage's words
    assert any("restart --pair" in x or "--apply" in x for x in doc["recommendations"])
    r = run(dep, "stall-triage", "-i", inv, "--json", "--apply")
    assert r.code == 0, r.output
    assert [s["status"] for s in r.json()["steps"]] == ["recovered", "passed", "passed"]
