"""`pdctl watch --heal` against a real local 1P1D (bundled engine, real sglang-router, free ports) with the engine's
degraded-bootstrap drill armed on the prefill: a decode-only restart breaks the pair; the watch confirms it (K
failed canaries), records its evidence in the audit log, heals it with one co-restart, and the pair passes again.
With a budget of one heal an hour, the same break made again is not healed: the watch says the budget is spent,
and its exporter says so; so does a watch started after it (the budget is read from the audit log). `--heal=dry`
says what it would do and does nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pdctl.audit import read_records
from tests.e2e.helpers import FAST_WATCH, REPO, deployed, local_inventory, pdctl
from tests.e2e.test_watch import _scrape, _series, _timeline, _until
from tests.fixtures.net import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

FAST = {**FAST_WATCH, "heal_pair_failures": 2, "heal_max_per_hour": 1}


@pytest.fixture(scope="module")
def dep(tmp_path_factory):
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory(
        "watch-heal",
        ports,
        prefill_env={"PDCTL_DRILLS": "degraded-bootstrap"},
        decode_env={"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "3"},
    )
    inv["watch"] = FAST
    yield from deployed(tmp_path_factory, "watch-heal", inv)


def _watch(dep, tl, port: int, heal: str) -> subprocess.Popen:
    env = dict(os.environ, XDG_STATE_HOME=str(dep["state"]), COLUMNS="80", PDCTL_OPERATOR="test-operator")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pdctl",
            "watch",
            "-i",
            str(dep["inv"]),
            "--heal",
            heal,
            "--listen",
            f"127.0.0.1:{port}",
            "--timeline",
            str(tl),
            "--for",
            "240",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _break_the_pair(dep) -> None:
    r = pdctl(
        ["restart", "--role", "decode", "--override-hazard", "--no-verify", "--json", "-i", str(dep["inv"])],
        state=dep["state"],
        timeout=300,
    )
    assert r.code == 0, r.output


def _heals(tl, outcome: str) -> list[dict]:
    return [x for x in _timeline(tl) if x.get("event") == "heal" and x.get("outcome") == outcome]


def _stop(proc) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_dry_run_says_what_it_would_do_and_does_nothing(dep, tmp_path):
    tl, port = tmp_path / "dry.jsonl", free_port()
    before = pdctl(["status", "--json", "-i", str(dep["inv"])], state=dep["state"]).json()
    proc = _watch(dep, tl, port, "dry")
    try:
        _until("the watch's first pair canary", lambda: _series(_scrape(port), "pdctl_pair_ok"), 60)
        _break_the_pair(dep)
        said = _until("a dry heal line", lambda: _heals(tl, "dry"), 60)
        assert said[0]["action"] == "restart --pair" and "would run `pdctl restart --pair`" in said[0]["detail"]
        assert _series(_scrape(port), "pdctl_heals_total", outcome="dry")
    finally:
        _stop(proc)
    assert not _heals(tl, "done") and not _heals(tl, "started")
    after = pdctl(["status", "--json", "-i", str(dep["inv"])], state=dep["state"]).json()
    prefill = lambda doc: [r["pid"] for r in doc["roles"] if r["role"] == "prefill"]  # noqa: E731
    assert prefill(after) == prefill(before)  # nothing was restarted by the dry run
    # leave the pair healed for the next test
    assert pdctl(["restart", "--pair", "-i", str(dep["inv"]), "--json"], state=dep["state"], timeout=300).code == 0


def test_heals_a_broken_pair_once_then_the_budget_stops_it(dep, tmp_path):
    tl, port = tmp_path / "heal.jsonl", free_port()
    proc = _watch(dep, tl, port, "on")
    try:
        _until(
            "the watch's first pair canary passing",
            lambda: set(_series(_scrape(port), "pdctl_pair_ok").values()) == {1.0},
            60,
        )
        _break_the_pair(dep)
        done = _until("a heal done", lambda: _heals(tl, "done"), 150)
        assert done[0]["action"] == "restart --pair" and done[0]["case"] in ("degraded-bootstrap", "pair-broken")
        try:
            _until(
                "the pair passing again after the heal",
                # a canary sent while the decode was down waits its whole slot (the probe timeout, 30 s)
                lambda: set(_series(_scrape(port), "pdctl_pair_ok").values()) == {1.0},
                90,
            )
        except AssertionError as e:
            raise AssertionError(
                f"{e}; timeline after the heal: {[x for x in _timeline(tl) if x['t'] >= done[0]['t']][:30]}"
            ) from None
        assert pdctl(["verify", "pairs", "-i", str(dep["inv"])], state=dep["state"]).code == 0

        records = [r for r in read_records(dep["state"] / "pdctl" / "audit.jsonl") if isinstance(r, dict)]
        heal = [r for r in records if r["action"] == "watch heal"]
        assert [r["result"] for r in heal] == ["started", "ok"] and heal[0]["run"] == heal[1]["run"], heal
        assert (heal[1]["outcome"], heal[1]["final_health"], heal[1]["exit_code"]) == ("done", "passed", 0)
        ev = heal[0]["evidence"]  # recorded before acting
        assert ev["case"] == done[0]["case"] and ev["failing_checks"] and ev["pairs"]
        assert any(label.startswith("prefill[0]") for label in ev["log_tails"]) and ev["metrics"]
        after = records[records.index(heal[0]) :]
        assert [r["action"] for r in after if r["result"] != "started"][:2] == ["restart --pair", "watch heal"]
        # history reads the heal right (issue 28, W4): ok, never listed as failed
        history = ["history", "--json", "--action", "watch heal", "--result"]
        assert pdctl([*history, "failed"], state=dep["state"]).json()["records"] == []
        assert [r["outcome"] for r in pdctl([*history, "ok"], state=dep["state"]).json()["records"]] == ["done"]

        _break_the_pair(dep)  # the same break again, within the hour: the budget of one is spent
        refused = _until(
            "the heal refused for its budget",
            lambda: [x for x in _heals(tl, "refused") if "budget spent" in x.get("detail", "")],
            150,
        )
        assert "at most 1" in refused[0]["detail"]
        assert set(_series(_scrape(port), "pdctl_heal_budget_exhausted").values()) == {1.0}
        assert len(_heals(tl, "done")) == 1
    finally:
        _stop(proc)

    # a watch started after that one counts its heal (issue 28, W3): the pair still broken, the budget still spent
    tl2, port2 = tmp_path / "heal-again.jsonl", free_port()
    proc = _watch(dep, tl2, port2, "on")
    try:
        refused = _until(
            "the next watch's heal refused for its budget",
            lambda: [x for x in _heals(tl2, "refused") if "budget spent" in x.get("detail", "")],
            150,
        )
        assert "(1 in the last hour, at most 1)" in refused[0]["detail"]
        assert set(_series(_scrape(port2), "pdctl_heal_budget_exhausted").values()) == {1.0}
        assert not _heals(tl2, "started") and not _heals(tl2, "done")
    finally:
        _stop(proc)
