"""Restart lineage per prefill x decode pair on a real 2x2 bundled-engine deployment behind a real sglang-router on
this machine (free ports): green after deploy; after every decode is restarted alone (`restart --role decode
--override-hazard`), each decode is named with BOTH long-running prefills it came back under, and `verify pairs`
marks every pair of the matrix with the hazard."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import deployed, layer, pdctl
from tests.e2e.test_verify_pairs import xpyd_inventory

pytestmark = [pytest.mark.e2e, pytest.mark.engine]


@pytest.fixture(scope="module")
def xpyd(tmp_path_factory):
    yield from deployed(tmp_path_factory, "lineage-xpyd", xpyd_inventory("lineage-xpyd"))


def _run(dep, *args: str, env: dict | None = None, timeout: float = 240):
    return pdctl([*args, "-i", str(dep["inv"])], state=dep["state"], env=env, timeout=timeout)


def test_decodes_restarted_alone_are_named_with_both_prefills(xpyd):
    before = _run(xpyd, "verify", "final-health", "--layer", "lineage", "--json")
    assert before.code == 0, before.output
    rows = layer(before.json(), "lineage")
    decodes = [r for r in rows if r["target"].startswith("decode[")]
    prefills = sorted(r["target"] for r in rows if r["target"].startswith("prefill["))
    assert len(decodes) == 2 and len(prefills) == 2 and {r["status"] for r in rows} == {"pass"}
    assert all("unchanged since the last co-restart" in r["observed"] and "pairs" not in r["data"] for r in decodes)
    matrix = _run(xpyd, "verify", "pairs", "--json")
    assert matrix.code == 0 and [p["lineage_hazard"] for p in matrix.json()["pairs"]] == [None] * 4, matrix.output

    forced = _run(xpyd, "restart", "--role", "decode", "--override-hazard", "--no-verify", "--json")
    assert forced.code == 0, forced.output
    assert any("hazard overridden" in w for w in forced.json()["warnings"]), forced.output

    after = _run(xpyd, "verify", "final-health", "--layer", "lineage", "--json")
    assert after.code == 1, after.output
    rows = {r["target"]: r for r in layer(after.json(), "lineage") if r["name"] == "restart lineage"}
    bad = {t: r for t, r in rows.items() if t.startswith("decode[")}
    assert len(bad) == 2 and {r["status"] for r in bad.values()} == {"fail"}, rows
    for d, r in bad.items():
        assert sorted((p["prefill"], p["decode"], p["hazard"]) for p in r["data"]["pairs"]) == [
            (p, d, "degraded-bootstrap") for p in prefills
        ], r
        assert r["observed"] == f"restarted alone under {prefills[0]}, {prefills[1]}", r
        assert r["data"]["hazard"] == "degraded-bootstrap" and r["data"]["prefill"] == prefills[0]
        assert "pdctl restart --pair" in r["next_step"] or "restart --pair" in r["detail"]
    assert all(r["status"] == "pass" for t, r in rows.items() if t.startswith("router["))

    screen = _run(xpyd, "verify", "final-health", "--layer", "lineage", env={"COLUMNS": "80"})
    assert screen.code == 1
    lines = screen.stdout.splitlines()
    assert lines[0].startswith("final-health: FAIL"), screen.stdout
    assert all(len(line.rstrip()) <= 80 for line in lines), screen.stdout
    for label in [*prefills, *bad]:
        assert any(label in line for line in lines), (label, screen.stdout)

    # the matrix marks every pair (the canaries still pass: the bundled engine has no drill armed here)
    matrix = _run(xpyd, "verify", "pairs", "--json")
    assert matrix.code == 0, matrix.output
    assert [p["lineage_hazard"] for p in matrix.json()["pairs"]] == ["degraded-bootstrap"] * 4, matrix.output
    shown = _run(xpyd, "verify", "pairs", env={"COLUMNS": "80"})
    assert shown.code == 0 and all(len(line.rstrip()) <= 80 for line in shown.stdout.splitlines()), shown.stdout
    marked = shown.stdout.split("restart-lineage hazards (see", 1)[1].split("instances", 1)[0]
    assert marked.count(": degraded-bootstrap") == 4 and "prefill[1] -> decode[0]" in marked, shown.stdout
    # every pair marked on a 2x2: the rolling co-restart heals them with the service up (no pair to put first)
    assert shown.stdout.rstrip().endswith("next: pdctl restart --rolling"), shown.stdout
    assert matrix.json()["next_steps"] == ["pdctl restart --rolling"], matrix.output

    status = _run(xpyd, "status", "--json")
    hazards = status.json()["hazards"]
    assert sum(1 for h in hazards if h.startswith("restart lineage: decode[")) == 2, hazards
