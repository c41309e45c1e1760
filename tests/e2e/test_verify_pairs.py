"""`pdctl verify pairs` against real bundled-engine deployments of 2 prefills, 2 decodes and 1 sglang-router on this
machine (free ports): a healthy one where the 2x2 matrix passes, and one where the engine's degraded-bootstrap drill
breaks exactly one pair while the router's own probe (the e2e layer) stays green."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.e2e.helpers import pdctl, write_inventory
from tests.engine.test_storm_engine import _kill_leftovers
from tests.fixtures.net import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.engine]


def xpyd_inventory(name: str, *, prefill_env: list[dict] | None = None, decode_env: dict | None = None) -> dict:
    """2 prefills, 2 decodes, 1 router, all on this machine's free ports. The router picks pairs at random (an
    operator's choice; its default cache-aware policy would keep sending one prompt to one pair)."""
    prefill_env = prefill_env or [{}, {}]
    worker = {"host": "local", "ready_timeout": 180}
    return {
        "name": name, "engine": "bundled",
        "hosts": {"local": {"transport": "local", "service_manager": "pidfile"}},
        "roles": {
            "prefill": [{**worker, "port": free_port(), "bootstrap_port": free_port(), "env": prefill_env[i]}
                        for i in range(2)],
            "decode": [{**worker, "port": free_port(), "env": decode_env or {}} for _ in range(2)],
            "router": [{**worker, "port": free_port(),
                        "args": {"--prometheus-port": free_port(), "--health-check-interval-secs": 2,
                                 "--policy": "random"}}],
        },
    }


def _deploy(tmp_path_factory, name: str, inv: dict):
    state = tmp_path_factory.mktemp(name)
    path = write_inventory(state / "inv.yaml", inv)
    try:
        r = pdctl(["deploy", "-i", str(path), "--no-verify", "--json"], state=state, timeout=400)
        assert r.code == 0, r.output
        yield {"state": state, "inv": path, "data": inv}
    finally:
        pdctl(["down", "-i", str(path)], state=state, timeout=120)
        _kill_leftovers(state)


def _run(dep, *args: str, timeout: float = 120):
    return pdctl([*args, "-i", str(dep["inv"])], state=dep["state"], timeout=timeout)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    yield from _deploy(tmp_path_factory, "pairs-healthy", xpyd_inventory("pairs-healthy"))


def test_every_pair_of_a_healthy_2x2_passes(healthy):
    r = _run(healthy, "verify", "pairs", "--json")
    assert r.code == 0, r.output
    doc = r.json()
    assert doc["ok"] is True and doc["exit_code"] == 0
    assert len(doc["prefills"]) == 2 and len(doc["decodes"]) == 2
    assert sorted((p["prefill"], p["decode"]) for p in doc["pairs"]) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert {p["status"] for p in doc["pairs"]} == {"pass"}
    assert len({p["room"] for p in doc["pairs"]}) == 4          # a fresh bootstrap_room per canary
    assert all(p["content"].strip() and not p["aborted"] for p in doc["pairs"])


def test_matrix_screen_at_80_columns(healthy):
    r = _run(healthy, "verify", "pairs")
    r80 = pdctl(["verify", "pairs", "-i", str(healthy["inv"])], state=healthy["state"], env={"COLUMNS": "80"},
                timeout=120)
    assert r.code == 0 and r80.code == 0, r.output + r80.output
    lines = r80.stdout.splitlines()
    assert lines[0].startswith("verify pairs: PASS (4 of 4 pairs pass)"), r80.stdout
    assert all(len(line) <= 80 for line in lines), r80.stdout
    header = next(line for line in lines if "decode[0]" in line and "decode[1]" in line)
    rows = [line for line in lines if line.lstrip().startswith("prefill[")]
    assert header and len(rows) >= 2 and all(line.count("pass") == 2 for line in rows[:2]), r80.stdout


def test_final_health_runs_pairs_only_when_named(healthy):
    r = _run(healthy, "verify", "final-health", "--layer", "pairs", "--json")
    assert r.code == 0, r.output
    rows = r.json()["layers"]["pairs"]
    assert sorted(row["target"] for row in rows) == [
        "prefill[0] -> decode[0]", "prefill[0] -> decode[1]", "prefill[1] -> decode[0]", "prefill[1] -> decode[1]"]
    assert {row["status"] for row in rows} == {"pass"}
    default = _run(healthy, "verify", "final-health", "--layer", "health", "--json")
    assert "pairs" not in default.json()["layers"]


# -- one broken pair ------------------------------------------------------------------------------------------
# The drill on prefill[1]: transfers to every decode but the first it ever saw fail silently. The decodes give up
# on a room after 4 s (so the router, which retries a failed request, still answers within the probe's 30 s).
WAIT_S = "4"


@pytest.fixture(scope="module")
def one_broken(tmp_path_factory):
    inv = xpyd_inventory("pairs-broken", prefill_env=[{}, {"PDCTL_DRILLS": "degraded-bootstrap"}],
                         decode_env={"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": WAIT_S})
    for dep in _deploy(tmp_path_factory, "pairs-broken", inv):
        _pair_request(inv, prefill=1, decode=0)   # decode[0] is the first peer prefill[1] sees: decode[1] is not
        yield dep


def _pair_request(inv: dict, *, prefill: int, decode: int) -> None:
    p, d = inv["roles"]["prefill"][prefill], inv["roles"]["decode"][decode]
    body = {"text": "warm", "sampling_params": {"max_new_tokens": 2}, "bootstrap_host": "127.0.0.1",
            "bootstrap_port": p["bootstrap_port"], "bootstrap_room": 12345}
    answers: dict[str, int] = {}
    side = threading.Thread(target=lambda: answers.setdefault(
        "p", httpx.post(f"http://127.0.0.1:{p['port']}/generate", json=body, timeout=30).status_code))
    side.start()
    answers["d"] = httpx.post(f"http://127.0.0.1:{d['port']}/generate", json=body, timeout=30).status_code
    side.join(35)
    assert answers == {"p": 200, "d": 200}, answers


def test_one_broken_pair_is_named_while_the_router_probe_passes(one_broken):
    e2e = _run(one_broken, "verify", "final-health", "--layer", "e2e", "--json")
    assert e2e.code == 0, e2e.output                               # the router hides it (random pair, retries)
    r = _run(one_broken, "verify", "pairs", "--budget", "4", "--json")
    assert r.code == 1, r.output
    doc = r.json()
    assert doc["verdict"]["failed"] == ["prefill[1] -> decode[1]"], doc["verdict"]
    broken = next(p for p in doc["pairs"] if p["status"] == "fail")
    assert "decode" in broken["found"], broken
    # the canary past its slot: connections closed, its rid aborted on both workers
    assert broken["aborted"][0] == "closed both connections", broken
    assert any("on prefill[1]" in a and "HTTP 200" in a for a in broken["aborted"]), broken
    assert any("on decode[1]" in a and "HTTP 200" in a for a in broken["aborted"]), broken
    screen = _run(one_broken, "verify", "pairs", "--budget", "4")
    assert screen.code == 1
    assert screen.stdout.splitlines()[0] == "verify pairs: FAIL (1 of 4 pair(s) failed: prefill[1] -> decode[1])"
    assert "prefill[1] -> decode[1]" in screen.stdout.split("failed pairs", 1)[1]
