"""`pdctl verify pairs` against real bundled-engine deployments of 2 prefills, 2 decodes and 1 sglang-router on this
machine (free ports): a healthy one where the 2x2 matrix passes, and one with the engine's degraded-bootstrap drill
armed on prefill[0]: green after deploy, then a decode-only restart (forced past the hazard) breaks exactly
prefill[0]'s pairs while the router's own probe (the e2e layer) stays green."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import deployed, pdctl
from tests.fixtures.net import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.engine]


def xpyd_inventory(
    name: str, *, prefill_env: list[dict] | None = None, decode_env: dict | None = None, router_args: dict | None = None
) -> dict:
    """2 prefills, 2 decodes, 1 router, all on this machine's free ports. The router picks pairs at random (an
    operator's choice; its default cache-aware policy would keep sending one prompt to one pair)."""
    prefill_env = prefill_env or [{}, {}]
    worker = {"host": "local", "ready_timeout": 180}
    return {
        "name": name,
        "engine": "bundled",
        "hosts": {"local": {"transport": "local", "service_manager": "pidfile"}},
        "roles": {
            "prefill": [
                {**worker, "port": free_port(), "bootstrap_port": free_port(), "env": prefill_env[i]} for i in range(2)
            ],
            "decode": [{**worker, "port": free_port(), "env": decode_env or {}} for _ in range(2)],
            "router": [
                {
                    **worker,
                    "port": free_port(),
                    "args": {
                        "--prometheus-port": free_port(),
                        "--health-check-interval-secs": 2,
                        "--policy": "random",
                        **(router_args or {}),
                    },
                }
            ],
        },
    }


def _deploy(tmp_path_factory, name: str, inv: dict):
    return deployed(tmp_path_factory, name, inv, timeout=400)


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
    assert len({p["room"] for p in doc["pairs"]}) == 4  # a fresh bootstrap_room per canary
    assert all(p["content"].strip() and not p["aborted"] for p in doc["pairs"])


def test_matrix_screen_at_80_columns(healthy):
    r = _run(healthy, "verify", "pairs")
    r80 = pdctl(
        ["verify", "pairs", "-i", str(healthy["inv"])], state=healthy["state"], env={"COLUMNS": "80"}, timeout=120
    )
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
        "prefill[0] -> decode[0]",
        "prefill[0] -> decode[1]",
        "prefill[1] -> decode[0]",
        "prefill[1] -> decode[1]",
    ]
    assert {row["status"] for row in rows} == {"pass"}
    default = _run(healthy, "verify", "final-health", "--layer", "health", "--json")
    assert "pairs" not in default.json()["layers"]


# -- the drill on prefill[0], then a decode-only restart ---------------------------------------------------------
# The drill: a prefill fails silently to a decode it had paired with that came back as a new process. The decodes
# give up on a room after 3 s; the router retries up to 10 times, each time on a random pair, so its probe finds
# prefill[1] (half the pairs now fail) well within the probe's 30 s.
WAIT_S = "3"


@pytest.fixture(scope="module")
def restarted(tmp_path_factory):
    """Deploy, verify pairs (prefill[0] pairs with both decodes), restart both decodes under the running prefills."""
    inv = xpyd_inventory(
        "pairs-broken",
        prefill_env=[{"PDCTL_DRILLS": "degraded-bootstrap"}, {}],
        decode_env={"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": WAIT_S},
        router_args={"--retry-max-retries": 10},
    )
    for dep in _deploy(tmp_path_factory, "pairs-broken", inv):
        dep["before"] = _run(dep, "verify", "pairs", "--json")
        r = _run(dep, "restart", "--role", "decode", "--override-hazard", "--no-verify", "--json", timeout=400)
        assert r.code == 0, r.output
        dep["restart"] = r.json()
        yield dep


def test_armed_deployment_is_green_until_a_decode_restarts(restarted):
    before = restarted["before"]
    assert before.code == 0, before.output
    assert {p["status"] for p in before.json()["pairs"]} == {"pass"} and len(before.json()["pairs"]) == 4


def test_decode_restart_breaks_exactly_the_armed_prefills_pairs_while_the_router_probe_passes(restarted):
    dep = restarted
    e2e = _run(dep, "verify", "final-health", "--layer", "e2e", "--json")
    assert e2e.code == 0, e2e.output  # the router hides it (random pair, retries)
    r = _run(dep, "verify", "pairs", "--budget", "4", "--json")
    assert r.code == 1, r.output
    doc = r.json()
    assert doc["verdict"]["failed"] == ["prefill[0] -> decode[0]", "prefill[0] -> decode[1]"], doc["verdict"]
    status = {(p["prefill"], p["decode"]): p["status"] for p in doc["pairs"]}
    assert status == {(0, 0): "fail", (0, 1): "fail", (1, 0): "pass", (1, 1): "pass"}, doc["pairs"]
    for broken in (p for p in doc["pairs"] if p["status"] == "fail"):
        assert "prefill: HTTP 500" in broken["found"] or "decode" in broken["found"], broken
        # the prefill failed at once: the decode's leg (waiting for KV that never comes) is aborted then, not
        # left to the end of its slot
        assert any(
            f"on decode[{broken['decode']}]" in a and "HTTP 200" in a and "the prefill had failed" in a
            for a in broken["aborted"]
        ), broken
        assert "closed both connections" not in broken["aborted"], broken
    screen = pdctl(
        ["verify", "pairs", "--budget", "4", "-i", str(dep["inv"])],
        state=dep["state"],
        env={"COLUMNS": "80"},
        timeout=120,
    )
    assert screen.code == 1 and all(len(line) <= 80 for line in screen.stdout.splitlines()), screen.stdout
    lines = screen.stdout.splitlines()
    assert lines[0].startswith("verify pairs: FAIL (2 of 4 pair(s) failed"), screen.stdout
    # the verdict's pair names are never cut across lines
    named = " ".join(lines[:3])
    assert "prefill[0] -> decode[0]," in named and "prefill[0] -> decode[1]" in named, screen.stdout
    failed = screen.stdout.split("failed pairs", 1)[1].split("restart-lineage hazards", 1)[0]
    assert "prefill[0] -> decode[0]" in failed and "prefill[0] -> decode[1]" in failed, screen.stdout
    assert "prefill[1] ->" not in failed, screen.stdout
