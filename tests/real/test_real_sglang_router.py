"""pdctl against the real SGLang 0.5.23 behind sglang-router 0.3.2 (1 prefill x 1 decode, mooncake over loopback,
deployed by pdctl): every layer of final-health passes, the pair canary passes, lint asks the installed sglang and
sglang-router, and restart --pair keeps its order and stays green. The servers start once for the module."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import deployed, layer, pdctl, statuses
from tests.real.lane import real_inventory

pytestmark = [pytest.mark.e2e, pytest.mark.engine, pytest.mark.real]

LAYERS = ("health", "e2e", "transfer", "flags", "lineage")


@pytest.fixture(scope="module")
def dep(tmp_path_factory):
    yield from deployed(tmp_path_factory, "real-sr", real_inventory("real-sr", "sglang-router"), timeout=900)


def run(dep, *args: str, timeout: float = 600):
    return pdctl([*args, "-i", str(dep["inv"])], state=dep["state"], timeout=timeout)


def test_final_health_passes_every_layer(dep):
    r = run(dep, "verify", "final-health", "--json")
    assert r.code == 0, r.output
    doc = r.json()
    for name in LAYERS:
        assert statuses(doc, name) <= {"pass"}, (name, layer(doc, name))
    router = [c for c in layer(doc, "health") if c["target"].startswith("router")]
    # sglang-router 0.3.2 shows each worker's health only: no status, no breaker gauge
    assert sum(c["name"].startswith("worker ") and c["observed"] == "healthy" for c in router) == 2, router
    assert not any(c["name"].startswith("breaker") for c in router)


def test_pairs_and_lint(dep):
    pairs = run(dep, "verify", "pairs", "--json")
    assert pairs.code == 0, pairs.output
    lint = run(dep, "lint", "--json")
    assert lint.code == 0, lint.output
    kinds = {row["role"]: (row["kind"], row.get("version")) for row in lint.json()["roles"]}
    assert kinds == {
        "prefill": ("sglang", "0.5.23"),
        "decode": ("sglang", "0.5.23"),
        "router": ("sglang-router", "0.3.2"),
    }, kinds


def test_restart_pair_keeps_its_order_and_stays_green(dep):
    r = run(dep, "restart", "--pair", "--json", timeout=1200)
    assert r.code == 0, r.output
    steps = [s["step"] for s in r.json()["steps"]]
    started = [s.split()[1].split("[")[0] for s in steps if s.startswith(("restart", "start"))]
    assert steps[0].startswith("stop decode[") and started == ["prefill", "decode", "router"], steps
    assert r.json()["final_health"]["ok"]
