"""The seed's failures at 3 a.m., at 80x24: a real local 1P1D (bundled engine, the seed's sglang-router, free
ports) with the degraded-bootstrap and update_status-race drills armed on its prefill. For a degraded bootstrap (the
decode restarted alone), a killed decode and a pin (an aimed abort storm), `pdctl verify final-health` and `pdctl
triage` run in a real 80x24 tmux pane: the whole answer is on the screen, its first line the verdict, its second the
next command, its last both again; triage names one cause per finding and says what it ruled out. Each test starts
from a co-restarted, healthy pair."""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.e2e.helpers import deployed, local_inventory, pdctl
from tests.engine.test_storm_engine import DELAY, STORM
from tests.fixtures.net import free_port
from tests.fixtures.tmux_pane import PaneRun, run_in_pane

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

NAME = "three-am"


@pytest.fixture(scope="module")
def dep(tmp_path_factory):
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory(
        NAME,
        ports,
        prefill_env={"PDCTL_DRILLS": f"degraded-bootstrap,status-update-race,{DELAY}"},
        router_kind="sglang-router",  # the seed's router: it passes a client's disconnect on (the pin's storm)
    )
    # a probe through sglang-router to a broken pair waits out its bound: 10 s rather than 30 keeps the module short
    inv["final_health"] = {"probe": {"timeout": 10}}
    yield from deployed(tmp_path_factory, NAME, inv)


def _cli(dep, *args: str, timeout: float = 300):
    return pdctl([args[0], "-i", str(dep["inv"]), *args[1:]], state=dep["state"], timeout=timeout)


@pytest.fixture
def fresh(dep):
    """A co-restarted, verified pair before the test: no test depends on what another left."""
    r = _cli(dep, "restart", "--pair", "--json")
    assert r.code == 0, r.output
    return dep


def _pane(dep, tmp_path, *args: str) -> PaneRun:
    env = {"XDG_STATE_HOME": str(dep["state"]), "PDCTL_OPERATOR": "three-am-test"}
    return run_in_pane([args[0], *args[1:], "-i", str(dep["inv"])], env, tmp_path)


def _one_screen(run: PaneRun, verdict: str, step: str) -> None:
    """The whole answer on an 80x24 screen: first the verdict, then the next command; last both again."""
    lines = run.lines
    assert run.size == "80x24" and len(lines) <= 23, run.screen  # the shell's prompt row left free
    assert all(len(x.rstrip()) <= 80 for x in lines) and "…" not in run.screen, run.screen
    assert lines[0].startswith(verdict), run.screen
    assert lines[1].startswith(f"next: {step}"), run.screen
    assert lines[-1].startswith(verdict.split(" (")[0]) and lines[-1].endswith(f"-- next: {step}"), run.screen


def _flat(run: PaneRun) -> str:
    return " ".join(run.screen.split())


def test_a_degraded_bootstrap_one_finding_the_race_ruled_out_restart_pair_first_and_last(fresh, tmp_path):
    r = _cli(fresh, "restart", "--role", "decode", "--override-hazard", "--no-verify", "--json")
    assert r.code == 0, r.output
    fh = _pane(fresh, tmp_path, "verify", "final-health")
    assert fh.code == 1
    _one_screen(fh, "final-health: FAIL", "pdctl restart --pair")
    assert "restart lineage" in fh.screen and "restarted alone" in _flat(fh), fh.screen
    tr = _pane(fresh, tmp_path, "triage")
    assert tr.code == 1
    _one_screen(tr, "triage: ACTION NEEDED", "pdctl restart --pair")
    flat = _flat(tr)
    # one finding, for the one cause: the routers' breakers and the decode's waiting requests are its consequences
    assert tr.screen.count("[action]") == 1 and "degraded-bootstrap hazard" in flat, tr.screen
    assert "the update_status race" in flat and "fail fast" in flat, tr.screen  # ruled out, with the evidence
    assert "seed's silent wedge" not in flat and "will not time out on its own" not in flat, tr.screen


def test_a_killed_decode_names_it_not_running_and_restart_pair_first_and_last(fresh, tmp_path):
    st = _cli(fresh, "status", "--json")
    decode = next(x for x in json.loads(st.stdout)["roles"] if x["role"] == "decode")
    os.kill(decode["pid"], signal.SIGKILL)
    fh = _pane(fresh, tmp_path, "verify", "final-health")
    assert fh.code == 1
    _one_screen(fh, "final-health: FAIL", "pdctl restart --pair")
    assert "main process" in fh.screen and "connection refused" in _flat(fh), fh.screen
    tr = _pane(fresh, tmp_path, "triage")
    assert tr.code == 1
    _one_screen(tr, "triage: ACTION NEEDED", "pdctl restart --pair")
    # the router's readiness without the decode is the stop's doing, said in its one finding
    assert tr.screen.count("[action]") == 1 and "not running: decode[0]" in tr.screen, tr.screen
    # a canary to the dead decode ends when the decode refuses: its prefill leg is aborted then, not held to the
    # end of its slot waiting for a bootstrap that never comes
    pairs = pdctl(["verify", "pairs", "-i", str(fresh["inv"]), "--json"], state=fresh["state"], timeout=120)
    (pair,) = pairs.json()["pairs"]
    assert pair["status"] == "fail" and "decode: connection refused" in pair["found"], pair
    assert any("on prefill[0]" in a and "the decode had failed" in a for a in pair["aborted"]), pair
    assert "closed both connections" not in pair["aborted"], pair


def test_a_pin_is_named_with_the_degraded_bootstrap_ruled_out(fresh, tmp_path):
    r = pdctl(
        ["storm", "-i", str(fresh["inv"]), "--json", *STORM, "--target", "transfer-window", "--requests", "6"],
        state=fresh["state"],
        timeout=300,
    )
    assert r.code == 1 and r.json()["verdict"]["pinned"], r.output  # the aimed storm pinned a room
    fh = _pane(fresh, tmp_path, "verify", "final-health")
    # final-health has no window: what it sees of a pin is the storm's aborted transfers; it points at triage
    if fh.code == 1:
        _one_screen(fh, "final-health: FAIL", "pdctl triage")
    else:
        assert fh.lines[0] == "final-health: PASS", fh.screen
    tr = _pane(fresh, tmp_path, "triage")
    assert tr.code == 1
    _one_screen(tr, "triage: ACTION NEEDED", "pdctl restart --pair")
    flat = _flat(tr)
    assert "pinned" in flat and "a degraded bootstrap" in flat and "restart lineage is clean" in flat, tr.screen
