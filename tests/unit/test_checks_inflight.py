from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from pdctl.checks import metric_names as N
from pdctl.checks.inflight import inflight_point, judge_inflight
from pdctl.checks.metrics import parse_metrics
from pdctl.checks.result import Status

FIX = Path(__file__).parent / "fixtures"
INF = N.PREFILL_INFLIGHT_QUEUE


def series(values, gens, step=12.0, key=INF):
    return [(i * step, {key: v}, g) for i, (v, g) in enumerate(zip(values, gens))]


def test_seed_storm_after_load_stops_residual_one_with_progress_is_busy():
    # the seed's t+12..t+60 inflight 11, 11, 0, 0, 1 while decode kept generating
    v = judge_inflight(series([11, 11, 11, 0, 0, 1], [100, 400, 900, 1300, 1300, 1310]), 60)
    assert v.verdict == "busy" and v.conclusive
    assert v.generation_tokens_delta == 1210 and v.queue_changes == 2
    r = v.to_check_result("prefill[0]")
    assert r.status is Status.WARN and r.layer == "inflight" and "progress" in r.detail


def test_seed_wedge_inflight_pinned_with_idle_decode():
    v = judge_inflight(series([1] * 6, [5000] * 6), 60)
    assert v.verdict == "pinned" and v.no_progress_for_s == 60 and v.nonzero_for_s == 60
    r = v.to_check_result("prefill[0]")
    assert r.status is Status.FAIL and "restart --pair" in r.detail and "observed" in r.detail


def test_drained_and_stays_zero():
    v = judge_inflight(series([0] * 6, [10, 10, 10, 10, 10, 10]), 60)
    assert v.verdict == "drained" and v.to_check_result("x").status is Status.PASS


def test_drained_at_end_but_not_for_the_window_is_busy():
    v = judge_inflight(series([3, 2, 0, 0, 0, 0], [0] * 6), 60)
    assert v.verdict == "busy" and v.last[INF] == 0


def test_window_uses_only_the_tail_anchored_at_window_start():
    # an old spike is outside the 24 s window: only the tail counts
    v = judge_inflight(series([5, 4, 0, 0, 0], [0, 10, 20, 20, 20]), 24)
    assert v.verdict == "drained" and v.covered_s == 24 and v.samples == 3


def test_short_coverage_is_inconclusive_and_never_a_fail():
    v = judge_inflight(series([1, 1], [7, 7]), 60)
    assert v.verdict == "pinned" and not v.conclusive
    assert v.to_check_result("x").status is Status.WARN and "inconclusive" in v.summary


def test_without_generation_tokens_queue_changes_still_count():
    v = judge_inflight(series([2, 3, 1, 2], [None] * 4), 36)
    assert v.verdict == "busy" and v.generation_tokens_delta is None and any("not measured" in n for n in v.notes)
    v = judge_inflight(series([2, 2, 2, 2], [None] * 4), 36)
    assert v.verdict == "pinned"


def test_counter_reset_counts_as_change():
    v = judge_inflight(series([1, 1, 1], [900, 900, 3]), 24)
    assert v.verdict == "busy" and any("reset" in n for n in v.notes)


def test_bad_input():
    with pytest.raises(ValueError):
        judge_inflight([], 60)
    with pytest.raises(ValueError):
        judge_inflight(series([0], [0]), 0)


def test_inflight_point_from_real_captures():
    p = parse_metrics((FIX / "sglang-0.5.23-metrics-prefill-idle.prom").read_text())
    d = parse_metrics((FIX / "sglang-0.5.23-metrics-decode-idle.prom").read_text())
    gauges, gen = inflight_point([p], [d])
    assert gauges == {
        N.PREFILL_BOOTSTRAP_QUEUE: 0,
        N.PREFILL_INFLIGHT_QUEUE: 0,
        N.DECODE_PREALLOC_QUEUE: 0,
        N.DECODE_TRANSFER_QUEUE: 0,
        N.NUM_RUNNING_REQS: 0,
    }
    assert gen == 0.0  # declared at rest without series
    assert inflight_point([], []) == ({}, None)


def test_inflight_point_selects_tp0_and_sums_instances():
    def prom(v, gen):
        lab = 'engine_type="prefill",model_name="m",moe_ep_rank="0",pp_rank="0"'
        return (
            f'# TYPE {INF} gauge\n{INF}{{{lab},tp_rank="0"}} {v}\n{INF}{{{lab},tp_rank="1"}} {v}\n'
            f"# TYPE {N.GENERATION_TOKENS} counter\n"
            f'{N.GENERATION_TOKENS}{{engine_type="decode",model_name="m"}} {gen}\n'
        )

    gauges, gen = inflight_point([parse_metrics(prom(2, 0)), parse_metrics(prom(1, 0))], [parse_metrics(prom(0, 42))])
    assert gauges[INF] == 3 and gen == 42


# -- properties -------------------------------------------------------------------------------------------------
gauge_dicts = st.dictionaries(st.sampled_from(list(N.INFLIGHT_GAUGES)), st.integers(0, 50).map(float), min_size=1)


@st.composite
def series_with_progress(draw):
    n = draw(st.integers(2, 12))
    step = draw(st.floats(1, 30))
    gauges = [draw(gauge_dicts) for _ in range(n)]
    incs = draw(st.lists(st.integers(0, 500), min_size=n - 1, max_size=n - 1))
    k = draw(st.integers(0, n - 2))
    incs[k] = max(incs[k], 1)  # at least one step of decode progress
    gen, total = [], draw(st.integers(0, 10_000))
    for i in range(n):
        gen.append(float(total))
        if i < n - 1:
            total += incs[i]
    return [(i * step, g, x) for i, (g, x) in enumerate(zip(gauges, gen))], step * (n - 1)


@settings(max_examples=300, deadline=None)
@given(series_with_progress())
def test_progress_is_never_pinned(case):
    samples, window = case
    assert judge_inflight(samples, window).verdict != "pinned"


@settings(max_examples=200, deadline=None)
@given(gauge_dicts, st.floats(0, 1e6), st.integers(2, 10), st.floats(1, 30))
def test_constant_nonzero_without_progress_is_pinned_and_zero_is_drained(g, gen, n, step):
    samples = [(i * step, dict(g), gen) for i in range(n)]
    v = judge_inflight(samples, step * (n - 1))
    assert v.verdict == ("pinned" if any(g.values()) else "drained")
    assert v.verdict in ("pinned", "drained", "busy")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1000), gauge_dicts, st.one_of(st.none(), st.floats(0, 1e6))), min_size=1, max_size=15
    ),
    st.floats(0.5, 2000),
)
def test_any_series_gets_a_verdict_and_drained_means_zero(samples, window):
    v = judge_inflight(samples, window)
    assert v.verdict in ("drained", "busy", "pinned")
    if v.verdict == "drained":
        assert all(val == 0 for val in v.peak.values())
