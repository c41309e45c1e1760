"""Pinned means pinned (issue 27): no pinned verdict from a window not yet sampled end to end (a piped watch's
first round), nor while rooms fail and are retried (the degraded bootstrap: failures no passing canary explained,
or a failing pair canary), whatever the queues look like; the abort storm that makes a real pin counts failures
too, and a passing canary explains those."""

from __future__ import annotations

from pdctl.checks.inflight import Point
from pdctl.checks.result import Status
from pdctl.checks.watch_state import WatchState

P0, D0 = "prefill[0]@a:30000", "decode[0]@b:30002"
STUCK = {"sglang:num_prefill_inflight_queue_reqs": 1.0}


def _point(t: float, failed: float = 0.0, gen: float = 100.0) -> Point:
    return Point(
        t=t,
        gauges=dict(STUCK),
        generation_tokens=gen,
        per_worker={P0: dict(STUCK)},
        counters={P0: {"transfer_failed": failed, "bootstrap_failed": 0.0}, D0: {"generation_tokens": gen}},
        gen_throughput={},
    )


def _inflight(st: WatchState):
    return next(c for c in st.checks.values() if c.layer == "inflight")


def test_a_room_with_no_progress_is_pinned_once_the_window_is_sampled_and_not_before():
    st = WatchState("d", started=0.0, inflight_window_s=20)
    st.apply_point(_point(0), 1000)
    first = _inflight(st)
    assert first.status is Status.WARN and "pinned" not in first.observed  # the piped watch's first round
    for i in range(1, 22):
        st.apply_point(_point(i), 1000 + i)
    assert st.inflight is not None and st.inflight.verdict == "pinned" and st.pinned
    assert _inflight(st).status is Status.FAIL and _inflight(st).observed == "pinned"


def test_rooms_that_fail_are_not_a_pin_until_a_passing_canary_explains_the_failures():
    st = WatchState("d", started=0.0, inflight_window_s=20)
    st.apply_point(_point(0), 1000)
    st.apply_point(_point(1, failed=2), 1001)  # rooms failed: the drill's decode gave up on them, or a storm
    for i in range(2, 40):
        st.apply_point(_point(i, failed=2), 1000 + i)
    assert st.inflight is not None and st.inflight.verdict == "busy" and not st.pinned
    assert "2 KV failure(s) counted that no passing canary explained" in st.inflight.notes[-1]
    st.apply_pairs([(P0, D0, "pass", 0.1)], 1041, started=1040)  # the storm's failures: the pair works
    st.apply_point(_point(41, failed=2), 1041)
    assert st.pinned and st.inflight.verdict == "pinned"


def test_a_failing_pair_canary_makes_a_stuck_room_no_pin():
    st = WatchState("d", started=0.0, inflight_window_s=20)
    st.apply_pairs([(P0, D0, "fail", None)], 1000)
    for i in range(0, 25):
        st.apply_point(_point(i), 1000 + i)
    assert not st.pinned and "the canary of prefill[0]@a:30000 -> decode[0]@b:30002 fails" in st.inflight.notes[-1]
    st.apply_pairs([(P0, D0, "pass", 0.1)], 1026)
    st.apply_point(_point(26), 1026)
    assert st.pinned
