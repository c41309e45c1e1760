"""Pure parts of `pdctl storm`: schedule, calibration maths, hit judgement, watch verdict, chart rendering."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, strategies as st

from pdctl.checks.storm import (
    AFTER,
    COMPLETED,
    EARLY,
    ERROR,
    HIT,
    LATE,
    RequestOutcome,
    classify,
    judge_hits,
    judge_watch,
)
from pdctl.ops.storm_plan import (
    Calibration,
    StormConfig,
    aimed_schedule,
    histogram_mean_delta,
    own_mean,
    prompt_ids,
    random_schedule,
)


def test_defaults_are_the_seeds_numbers():
    c = StormConfig()
    assert (c.requests, c.prompt_tokens, c.abort_min_s, c.abort_max_s, c.sample_every_s, c.watch_s) == (
        90,
        20000,
        0.1,
        3.0,
        12.0,
        60.0,
    )


@pytest.mark.parametrize(
    "kw",
    [
        dict(requests=0),
        dict(abort_min_s=4.0),
        dict(target="x"),
        dict(watch_s=0),
        dict(sample_every_s=100, watch_s=60),
        dict(target="transfer-window", calib_requests=0),
        dict(requests=10**6),
        dict(spacing_s=-1),
    ],
)
def test_bad_config_is_refused(kw):
    with pytest.raises(ValueError):
        StormConfig(**kw)


@given(st.integers(1, 200), st.floats(0, 5), st.floats(0, 5), st.integers(0, 10**6))
def test_random_schedule_is_uniform_within_bounds_and_reproducible(n, a, b, seed):
    lo, hi = min(a, b), max(a, b)
    s1 = random_schedule(n, lo, hi, random.Random(seed))
    assert len(s1) == n and all(lo <= x <= hi for x in s1)
    assert s1 == random_schedule(n, lo, hi, random.Random(seed))


def test_aimed_schedule_spaces_launches_and_aims_inside_the_window():
    plan = aimed_schedule(5, (1.5, 2.5), 3.0, random.Random(1))
    assert [p[0] for p in plan] == [0, 3, 6, 9, 12]
    assert all(1.5 <= a <= 2.5 for _l, a in plan)


def test_calibration_window_fractions_of_ttft():
    c = Calibration([3.0, 3.2, 2.8], None, None)
    assert c.ttft == 3.0
    assert c.window(0.6, 0.9) == pytest.approx((1.8, 2.7))
    assert c.service_time() == 3.0


def test_calibration_window_starts_no_earlier_than_prefill_end_or_transfer_start():
    # prefill compute ends at 2.0s, chunks move for the last 1.5s of a 3s first token
    c = Calibration([3.0], transfer_latency_s=1.5, prefill_ttft_s=2.0)
    lo, hi = c.window(0.6, 0.9)
    assert lo == pytest.approx(2.0) and hi == pytest.approx(2.7)
    assert c.service_time() == 2.0


def test_calibration_window_never_empty_when_transfers_are_instant():
    c = Calibration([6.0], transfer_latency_s=0.01, prefill_ttft_s=5.99)
    lo, hi = c.window(0.6, 0.9)
    assert lo < hi <= 6.0


def test_calibration_without_success_cannot_aim():
    with pytest.raises(ValueError):
        Calibration([], None, None, ["HTTP 503"]).window()


def test_histogram_mean_delta():
    assert histogram_mean_delta((1000.0, 2.0), (4000.0, 4.0)) == 1500.0
    assert histogram_mean_delta((1000.0, 2.0), (1000.0, 2.0)) is None
    assert histogram_mean_delta(None, (300.0, 3.0)) == 100.0
    assert histogram_mean_delta((9000.0, 9.0), (200.0, 1.0)) == 200.0  # reset: the new totals
    assert histogram_mean_delta((1.0, 1.0), None) is None


def o(aborted=None, first=None, finished=None, error=None):
    return RequestOutcome(0, 0.0, 1.0, 200, first, aborted, finished, error)


@pytest.mark.parametrize(
    "out,expected",
    [
        (o(aborted=2.0), HIT),
        (o(aborted=1.0), EARLY),
        (o(aborted=3.5), AFTER),
        (o(aborted=2.0, first=1.9), LATE),
        (o(finished=1.0), COMPLETED),
        (o(error="HTTP 503"), ERROR),
        (o(aborted=2.0, first=2.1), HIT),
    ],
)
def test_classify_against_the_window(out, expected):
    assert classify(out, (1.5, 3.0)) == expected


def test_hit_rate_counts_only_actual_aborts_and_confirms_with_counters():
    outs = [o(aborted=2.0), o(aborted=2.2), o(aborted=0.5), o(aborted=2.0, first=1.0), o(finished=0.4)]
    h = judge_hits(outs, (1.5, 3.0), transfer_failed_delta=1, residual_inflight=2)
    assert h.aborted == 4 and h.hits == 2 and h.hit_rate == 0.5
    assert h.counts[COMPLETED] == 1 and h.counts[LATE] == 1
    assert h.confirmed_in_window == 3


def test_hit_rate_without_window_is_unknown():
    h = judge_hits([o(aborted=2.0)], None)
    assert h.hit_rate is None and h.notes


def test_concurrent_launch_is_flagged_optimistic():
    assert any("optimistic" in n for n in judge_hits([o(aborted=2.0)], (1, 3), concurrent=True).notes)


def test_watch_drains_and_stays_zero_passes():
    v = judge_watch([(0, 11, 10), (12, 11, 20), (24, 0, 30), (36, 0, 30), (48, 0, 30), (60, 0, 30)], 60)
    assert v.passed and v.drained_after_s == 24 and not v.pinned


def test_seed_series_with_a_residual_one_at_the_end_fails():
    # the seed: t+12..t+60 inflight 11, 11, 0, 0, 1
    v = judge_watch([(12, 11, 1), (24, 11, 2), (36, 0, 3), (48, 0, 3), (60, 1, 3)], 48)
    assert not v.passed and v.rose_again and not v.pinned


def test_stuck_nonzero_without_progress_for_the_whole_watch_is_pinned():
    v = judge_watch([(t, 8, 10) for t in (0, 12, 24, 36, 48, 60)], 60)
    assert not v.passed and v.pinned and "pinned" in v.reason


def test_a_straggler_finishing_as_the_watch_starts_does_not_hide_a_pin():
    # the CI run that failed: 6 at t+0, then 5 unchanged for 3.5 s of a 4 s watch, generation tokens flat
    v = judge_watch([(0.0, 6, 10), (0.5, 5, 10), (1.5, 5, 10), (2.5, 5, 10), (3.5, 5, 10), (4.0, 5, 10)], 4.0)
    assert not v.passed and v.pinned and "last 3.5s" in v.reason


def test_a_short_unchanged_tail_is_not_a_pin():
    v = judge_watch([(0, 6, 10), (2, 5, 10), (3, 4, 10), (4, 4, 10)], 4.0)
    assert not v.passed and not v.pinned


def test_unchanged_tail_with_decode_progress_is_not_a_pin():
    v = judge_watch([(0, 5, 10), (2, 5, 20), (4, 5, 30)], 4.0)
    assert not v.passed and not v.pinned


def test_still_busy_at_the_end_is_a_fail_but_not_pinned():
    v = judge_watch([(0, 5, 10), (30, 3, 50), (60, 1, 90)], 60)
    assert not v.passed and not v.pinned


def test_drained_then_rose_then_drained_is_flagged():
    v = judge_watch([(0, 2, 0), (10, 0, 0), (20, 1, 0), (30, 0, 0)], 30)
    assert not v.passed and v.rose_again


def test_prompt_ids_are_printable_and_random():
    a, b = prompt_ids(100, random.Random(1)), prompt_ids(100, random.Random(2))
    assert len(a) == 100 and all(32 <= i < 127 for i in a) and a != b


def test_own_mean_takes_the_background_out_of_a_histogram_delta():
    # one storm-sized request (1.2 s prefill TTFT) among three background ones of 0.05 s each
    before, after = (10.0, 100.0), (10.0 + 1.2 + 3 * 0.05, 104.0)
    assert own_mean(before, after, 1, 0.05) == pytest.approx(1.2)
    # the plain delta mean is what the old calibration used: pulled toward the background
    assert histogram_mean_delta(before, after) == pytest.approx(0.3375)
    # no background: the plain mean; no background estimate: the plain mean too (nothing better is known)
    assert own_mean(before, (11.2, 101.0), 1, 0.05) == pytest.approx(1.2)
    assert own_mean(before, after, 1, None) == pytest.approx(0.3375)
    # fewer observations than ours (not recorded yet, or a reset to less): unknown
    assert own_mean(before, before, 1, 0.05) is None and own_mean(None, None, 1, 0.05) is None
    # a reset (counts went down) reads the new totals
    assert own_mean((500.0, 900.0), (1.2, 1.0), 1, 0.05) == pytest.approx(1.2)
    # a background estimate larger than what was added never gives a negative mean
    assert own_mean(before, after, 1, 5.0) == 0.0
