"""checks.storm.judge_storm: the storm's whole judgement over typed samples and request outcomes (ops.storm only
gathers them and calls it)."""

from __future__ import annotations

from pdctl.checks.inflight import Point
from pdctl.checks.metric_names import PREFILL_INFLIGHT_QUEUE as INF
from pdctl.checks.storm import RequestOutcome, StormVerdict, judge_storm

ABORTED = RequestOutcome(0, 0.0, 0.5, 200, aborted_s=0.5)


def _pt(t, inflight=0.0, *, gen=0.0, failed=0.0, unreadable=False):
    return Point(
        t=t,
        gauges={INF: inflight},
        generation_tokens=gen,
        per_worker={"prefill[0]": {INF: inflight}, "decode[0]": {INF: 0.0}},
        counters={"prefill[0]": {"transfer_failed": failed}},
        gen_throughput={},
        errors={"decode[0]": "refused"} if unreadable else {},
    )


def test_a_watch_that_drains_passes_with_no_holders():
    j = judge_storm([_pt(3.0), _pt(0.0, 2.0), _pt(1.0, 1.0), _pt(2.0)], [ABORTED], load_stopped_at=1.0, watch_s=2.0)
    assert j.verdict.passed and j.holders == {} and j.notes == []
    assert j.verdict.reason == "inflight drained to 0 by t+1.0s and stayed 0 to t+2.0s"  # sorted by t first


def test_a_stuck_watch_names_its_holders_and_since_when():
    pts = [_pt(0.0), _pt(1.0, 2.0), _pt(2.0, 0.0), _pt(3.0, 1.0), _pt(4.0, 1.0), _pt(5.0, 1.0)]
    j = judge_storm(pts, [ABORTED], load_stopped_at=1.0, watch_s=4.0)
    assert not j.verdict.passed
    assert j.holders == {"prefill[0]": {INF: 1.0}}  # only the nonzero gauges of the workers holding one
    assert j.verdict.reason.endswith("; held by prefill[0] (prefill_inflight_queue=1) for 2.0s since the load stopped")


def test_unreadable_samples_are_left_out_and_said():
    j = judge_storm(
        [_pt(0.0), _pt(1.0, 5.0, unreadable=True), _pt(1.0), _pt(2.0)], [], load_stopped_at=1.0, watch_s=1.0
    )
    assert j.verdict.passed and j.notes == ["1 sample(s) had an unreadable worker and were left out"]


def test_no_complete_sample_after_the_load_fails():
    j = judge_storm([_pt(0.0), _pt(2.0, unreadable=True)], [ABORTED], load_stopped_at=1.0, watch_s=1.0)
    assert not j.verdict.passed and j.verdict.reason == "no complete sample after the load stopped"


def test_a_verdict_already_reached_stands():
    failed = StormVerdict(False, "calibration failed: no request reached its first token", None, 0, 0, False, False)
    j = judge_storm([_pt(0.0), _pt(2.0)], [], load_stopped_at=1.0, watch_s=1.0, verdict=failed)
    assert j.verdict is failed and j.hits is None


def test_every_request_rejected_fails_whatever_inflight_did_unless_partial():
    rejected = [RequestOutcome(k, 0.0, 1.0, status_code=503, error="HTTP 503") for k in range(2)]
    pts = [_pt(0.0), _pt(1.0), _pt(2.0)]
    j = judge_storm(pts, rejected, load_stopped_at=1.0, watch_s=1.0)
    assert not j.verdict.passed
    assert (
        j.verdict.reason.startswith("all 2 requests were rejected or failed")
        and "; inflight: inflight drained" in j.verdict.reason
    )
    assert judge_storm(pts, rejected, load_stopped_at=1.0, watch_s=1.0, partial=True).verdict.passed


def test_a_partial_watch_is_judged_over_what_it_covered():
    pts = [_pt(0.0), _pt(1.0, 1.0), _pt(2.0, 1.0), _pt(3.0, 1.0)]
    assert judge_storm(pts, [], load_stopped_at=1.0, watch_s=30.0, partial=True).verdict.pinned
    assert not judge_storm(pts, [], load_stopped_at=1.0, watch_s=30.0).verdict.pinned  # 2 s of 30: not a pin


def test_hits_are_confirmed_by_the_counters_and_the_rooms_still_held():
    pts = [_pt(0.0, 1.0, failed=1.0), _pt(1.0, 3.0, failed=2.0), _pt(2.0, 3.0, failed=4.0)]
    j = judge_storm(pts, [ABORTED], load_stopped_at=1.0, watch_s=1.0, window=(0.4, 0.6), calibrated=True)
    assert j.hits.hits == 1 and j.hits.confirmed_in_window == 3.0 + 2.0  # transfer_failed +3, rooms +2
    uncalibrated = judge_storm(pts, [ABORTED], load_stopped_at=1.0, watch_s=1.0, concurrent=True)
    assert uncalibrated.hits.notes[-1] == "no calibration (--calibrate 0): hits are not judged by timing"
