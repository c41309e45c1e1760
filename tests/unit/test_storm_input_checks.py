"""`pdctl storm` refuses out-of-range numbers before any traffic, and a storm whose every request was rejected
fails, whatever inflight did (an inflight of 0 proves nothing when nothing got in)."""

from __future__ import annotations

import math

import pytest

from pdctl.checks.storm import RequestOutcome, all_rejected_reason
from pdctl.ops.inflight import Point
from pdctl.ops.storm import StormReport, audit_result, conclude
from pdctl.ops.storm_plan import StormConfig

INF = "sglang:num_prefill_inflight_queue_reqs"


@pytest.mark.parametrize(
    "kw, option",
    [
        (dict(max_new_tokens=-3), "--max-new-tokens"),
        (dict(max_new_tokens=0), "--max-new-tokens"),
        (dict(max_new_tokens=10**9), "--max-new-tokens"),
        (dict(watch_s=math.inf), "--watch"),
        (dict(watch_s=math.nan), "--watch"),
        (dict(sample_every_s=math.nan), "--sample-every"),
        (dict(sample_every_s=-1.0), "--sample-every"),
        (dict(abort_max_s=math.inf), "--abort-max"),
        (dict(abort_min_s=math.nan), "--abort-min"),
        (dict(spacing_s=math.inf), "--spacing"),
        (dict(spacing_s=math.nan), "--spacing"),
        (dict(aim_lo_frac=math.nan), "--aim-from"),
        (dict(aim_hi_frac=math.inf), "--aim-to"),
        (dict(requests=-1), "--requests"),
        (dict(prompt_tokens=-5), "--prompt-tokens"),
        (dict(calib_requests=-1), "--calibrate"),
        (dict(request_timeout_s=math.inf), "timeout"),
    ],
)
def test_out_of_range_storm_option_is_refused_naming_it(kw, option):
    with pytest.raises(ValueError) as e:
        StormConfig(**kw)
    assert option in str(e.value)


def _pt(t, inflight=0.0):
    return Point(
        t=t,
        gauges={INF: inflight},
        generation_tokens=0.0,
        per_worker={"prefill[0]": {INF: inflight}},
        counters={"prefill[0]": {"transfer_failed": 0.0, "bootstrap_failed": 0.0}},
        gen_throughput={},
    )


def _judged(outcomes):
    """A storm whose watch drained (inflight 0 throughout), judged as the storm does (ops.storm.conclude)."""
    cfg = StormConfig(requests=len(outcomes), watch_s=2.0, sample_every_s=1.0, calib_requests=0)
    rep = StormReport(
        config={"requests": len(outcomes), "target": "random"},
        router="http://r",
        points=[_pt(0.0), _pt(1.0), _pt(2.0), _pt(3.0)],
        load_started_at=0.5,
        load_stopped_at=1.0,
        outcomes=outcomes,
    )
    conclude(rep, cfg)
    return rep


def _rejected(k, code=400):
    return RequestOutcome(k, 0.0, 1.0, status_code=code, error=f"HTTP {code}")


def test_storm_whose_requests_were_all_rejected_fails_saying_so():
    rep = _judged([_rejected(0), _rejected(1), _rejected(2, 503)])
    assert not rep.ok and rep.exit_code() == 1
    reason = rep.verdict.reason
    assert reason.startswith("all 3 requests were rejected or failed")
    assert "2 x HTTP 400" in reason and "1 x HTTP 503" in reason
    assert "inflight drained to 0" in reason  # what inflight did is still said
    assert audit_result(rep).startswith("failed: all 3 requests were rejected")
    assert rep.weak_reason is None  # a fail, not a weak pass


def test_connection_errors_count_as_rejected_too():
    rep = _judged([RequestOutcome(0, 0.0, 1.0, error="ConnectError: refused")])
    assert not rep.ok and "1 x ConnectError: refused" in rep.verdict.reason


def test_one_aborted_or_one_completed_request_keeps_the_inflight_verdict():
    aborted = RequestOutcome(1, 0.0, 1.0, status_code=200, aborted_s=1.0)
    assert _judged([_rejected(0), aborted]).ok
    completed = RequestOutcome(1, 0.0, 1.0, status_code=200, first_token_s=0.2, finished_s=0.5)
    assert _judged([_rejected(0), completed]).ok


def test_no_outcomes_is_not_called_all_rejected():
    assert all_rejected_reason([]) is None
