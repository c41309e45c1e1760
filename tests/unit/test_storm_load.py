"""The storm's load phase and run loop without a server: a fake request coroutine (pure asyncio), fake metric reads.

A storm cut by its time bound keeps every finished request's outcome (and reports a hit rate); Ctrl-C stops and
joins the sampler before the judgement; every storm leaves one audit record, interrupted ones included.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from types import SimpleNamespace

import pytest

from pdctl.ops import storm as S
from pdctl.ops import storm_client as C
from pdctl.checks.inflight import Point
from pdctl.checks.storm import judge_hits
from pdctl.ops.storm_plan import StormConfig
from pdctl.progress import Progress

INF = "sglang:num_prefill_inflight_queue_reqs"


def fake_send(slow: set[int]):
    """A request: aborted by the client after its planned delay, except the `slow` ones, which never end."""

    async def send(base, path, body, *, abort_after_s, timeout_s, out, clock, client=None):
        t0 = clock()
        try:
            if out.index in slow:
                await asyncio.sleep(3600)
            await asyncio.sleep(abort_after_s or 0.0)
            out.status_code = 200
            out.aborted_s = clock() - t0
        except asyncio.CancelledError:
            out.error = "cut"
            raise
        return out

    return send


def test_bound_keeps_the_finished_outcomes_and_marks_the_rest():
    cfg = StormConfig(requests=5, calib_requests=0, sample_every_s=0.1, watch_s=1)
    # 0-2 abort fast, 3 never ends, 4 is launched after the bound
    plan = [(0.0, 0.01), (0.0, 0.02), (0.0, 0.03), (0.0, 0.01), (5.0, 0.01)]
    outcomes: list = []
    t = time.monotonic()
    cut = S.run_load(
        "http://127.0.0.1:9", cfg, plan, lambda k: b"{}", bound_s=1.5, outcomes=outcomes, send=fake_send({3})
    )
    assert cut and time.monotonic() - t < 3
    assert len(outcomes) == 5
    assert all(o.aborted_s is not None and o.error is None for o in outcomes[:3])
    assert outcomes[3].error == "cut" and outcomes[3].aborted_s is None
    assert outcomes[4].error.startswith("not sent")
    hits = judge_hits(outcomes, (0.0, 1.0))
    assert hits.aborted == 3 and hits.hits == 3 and hits.hit_rate == 1.0 and hits.counts["error"] == 2


def test_no_bound_returns_false_and_all_outcomes():
    cfg = StormConfig(requests=2, calib_requests=0, sample_every_s=0.1, watch_s=1)
    outcomes: list = []
    assert not S.run_load(
        "http://127.0.0.1:9",
        cfg,
        [(0.0, 0.01), (0.01, 0.01)],
        lambda k: b"{}",
        bound_s=5,
        outcomes=outcomes,
        send=fake_send(set()),
    )
    assert [o.index for o in outcomes] == [0, 1] and all(o.aborted_s is not None for o in outcomes)


class FakeInv:
    name = "t"
    source = "inv.yaml"
    final_health = SimpleNamespace(metrics_timeout=1.0, health_timeout=1.0)

    def instances(self, role=None):
        return [("router", 0, SimpleNamespace(host="local", port=9))] if role in (None, "router") else []


class FakeDep:
    def __init__(self):
        self.inv = FakeInv()
        self.progress = Progress()

    def base_url(self, role, i):
        return "http://127.0.0.1:9"


@pytest.fixture
def fakes(monkeypatch, tmp_path):
    log = tmp_path / "audit.jsonl"
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(log))

    def read_point(dep, t0=0.0, **_kw):
        time.sleep(0.005)
        return Point(
            t=time.monotonic() - t0,
            gauges={INF: 0.0},
            generation_tokens=0.0,
            per_worker={"prefill[0]": {INF: 0.0}},
            counters={},
            gen_throughput={},
        )

    monkeypatch.setattr(S, "read_point", read_point)
    # the bound also covers the event loop's start and the HTTP client's set-up (its TLS context): tenths of a
    # second on a loaded 2-core machine, so the fast requests (<= 0.05 s) are well inside it
    monkeypatch.setattr(S, "storm_bound_s", lambda cfg, spacing, max_abort: 1.5)
    monkeypatch.setattr(S, "_ask_router", lambda base, timeout: None)  # the fake router "answers"
    return log


def test_a_router_that_cannot_be_asked_stops_the_storm_before_any_load_or_record(monkeypatch, tmp_path):
    from pdctl.errors import UnreachableError
    from tests.fixtures.net import closed_port

    log = tmp_path / "audit.jsonl"
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(log))
    sent = []
    monkeypatch.setattr(C, "stream_once", lambda *a, **k: sent.append(a))
    dep = FakeDep()
    port = closed_port()
    dep.base_url = lambda role, i: f"http://127.0.0.1:{port}"
    with pytest.raises(UnreachableError, match="connection refused") as e:
        S.storm(dep, StormConfig(requests=2, calib_requests=0))
    assert e.value.exit_code == 3 and sent == [] and not log.exists()


def _records(log):
    return [json.loads(line) for line in log.read_text().splitlines()]


def _samplers_alive():
    return [t for t in threading.enumerate() if isinstance(t, S._Sampler) and t.is_alive()]


def test_storm_cut_by_its_bound_reports_outcomes_hit_rate_and_audits(fakes, monkeypatch):
    monkeypatch.setattr(C, "stream_once", fake_send({2}))
    cfg = StormConfig(
        requests=4, calib_requests=0, abort_min_s=0.01, abort_max_s=0.05, sample_every_s=0.1, watch_s=0.3, seed=1
    )
    rep = S.storm(FakeDep(), cfg)
    assert len(rep.outcomes) == 4
    assert sum(o.aborted_s is not None for o in rep.outcomes) == 3 and rep.outcomes[2].error == "cut"
    assert rep.hits is not None and rep.hits.aborted == 3
    assert any("hit its bound" in n for n in rep.notes)
    assert rep.verdict.passed and rep.exit_code() == 0
    assert not _samplers_alive()
    started, rec = _records(fakes)  # a storm records that it started before it sends anything
    assert started["result"] == "started" and started["run"] == rec["run"]
    assert (
        rec["action"] == "storm" and rec["result"] == "passed" and rec["inventory"] == os.path.abspath("inv.yaml")
    )  # absolute: found from any directory
    assert rec["args"]["requests"] == 4 and rec["args"]["router"] == "http://127.0.0.1:9"
    assert "exit_code" not in rec  # exit 0, as every other action's record
    assert rec["summary"]["requests"] == 4 and rec["summary"]["hits"]["aborted"] == 3


def test_ctrl_c_joins_the_sampler_judges_and_audits_interrupted(fakes, monkeypatch):
    async def interrupted(base, path, body, *, abort_after_s, timeout_s, out, clock, client=None):
        await asyncio.sleep(0.15)  # let the sampler take a few points first
        if out.index == 0:
            raise KeyboardInterrupt
        await asyncio.sleep(3600)

    monkeypatch.setattr(C, "stream_once", interrupted)
    monkeypatch.setattr(S, "storm_bound_s", lambda cfg, spacing, max_abort: 60.0)  # Ctrl-C ends it, never the bound
    cfg = StormConfig(
        requests=3, calib_requests=0, abort_min_s=0.01, abort_max_s=0.05, sample_every_s=0.02, watch_s=1, seed=2
    )
    rep = S.storm(FakeDep(), cfg)
    assert rep.partial and rep.exit_code() == 130
    assert not _samplers_alive()  # stopped and joined before the judgement
    ts = [p.t for p in rep.points]
    assert ts == sorted(ts) and len(ts) >= 2
    n = len(rep.points)
    time.sleep(0.1)
    assert len(rep.points) == n  # nothing appends after the report is returned
    assert len(rep.outcomes) == 3 and all(o.error for o in rep.outcomes[1:])
    _started, rec = _records(fakes)
    assert rec["action"] == "storm" and rec["result"] == "interrupted" and rec["summary"]["partial"] is True
    assert rec["exit_code"] == 130  # the CLI's exit, as an error's record has it


def test_audit_result_names_the_verdict():
    rep = S.StormReport(config={}, router="r")
    assert S.audit_result(rep) == "failed: no verdict"
    rep.partial = True
    assert S.audit_result(rep) == "interrupted"
    rep.interrupted_by = "SIGTERM"  # caught by the storm itself, still named as the CLI names it
    assert S.audit_result(rep) == "interrupted by SIGTERM"
