"""The room-balance rule of the inflight judge (issue 15 item 5): a pin under steady load is pinned, load without a
pin is busy, skewed gauges are not a pin. Series recorded with bench/bench_pinload.py (bundled engine, real router,
0.8 req/s steady load; fixtures/pinload-*.jsonl) and built by hand for the skew cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdctl.checks import metric_names as N
from pdctl.checks.inflight import BALANCE_WINDOW_S, NO_PROGRESS, ROOM_BALANCE, Point, balance_suspects_pin, judge_points
from pdctl.checks.result import Status

FIX = Path(__file__).parent / "fixtures"
INF, XFER = N.PREFILL_INFLIGHT_QUEUE, N.DECODE_TRANSFER_QUEUE


def recorded(name: str) -> list[Point]:
    pts = []
    for line in (FIX / name).read_text().splitlines():
        r = json.loads(line)
        pts.append(
            Point(
                t=r["t"],
                gauges=r["gauges"],
                generation_tokens=r["gen"],
                per_worker={},
                counters={},
                gen_throughput={},
                prefill_rooms=r["prefill_rooms"],
                decode_rooms=r["decode_rooms"],
            )
        )
    return pts


def point(t, inflight, prefill_rooms, decode_rooms, gen):
    return Point(
        t=t,
        gauges={INF: inflight, XFER: decode_rooms},
        generation_tokens=gen,
        per_worker={},
        counters={},
        gen_throughput={},
        prefill_rooms=prefill_rooms,
        decode_rooms=decode_rooms,
    )


def sliding(points, window_s):
    """The verdict of a `verify inflight --window W` ending at each sample (the way the watch judges)."""
    out = []
    for i, p in enumerate(points):
        if p.t - points[0].t >= BALANCE_WINDOW_S:
            v, _ = judge_points(points[: i + 1], window_s)
            out.append((p.t, v))
    return out


def test_recorded_pin_under_load_is_pinned_by_the_room_balance():
    pts = recorded("pinload-racy-pin.jsonl")
    verdicts = sliding(pts, 20.0)
    # before the pin the same load reads busy; after it, pinned by the balance (queue changes alone say busy)
    before = [v for t, v in verdicts if t < pts[0].t + 45]
    assert before and all(v.verdict == "busy" for v in before)
    last = verdicts[-1][1]
    assert last.verdict == "pinned" and last.pinned_by == ROOM_BALANCE and last.conclusive
    assert last.queue_changes > 0 and last.generation_tokens_delta > 0  # traffic flowed all along
    assert last.balance_median >= 1
    assert "pinned under load" in last.summary and "room balance" in last.summary
    r = last.to_check_result("prefill+decode")
    assert r.status is Status.FAIL and "restart --pair" in r.detail and "no change in any gauge" not in r.detail


def test_recorded_load_without_a_pin_is_never_pinned():
    # the fixed build (no race drill): steady load, then load plus a random abort storm, then load again
    pts = recorded("pinload-fixed-load.jsonl")
    assert pts[-1].t - pts[0].t >= 150
    verdicts = sliding(pts, 20.0)
    assert verdicts and all(v.verdict in ("busy", "drained") for _t, v in verdicts)
    assert any(v.verdict == "busy" for _t, v in verdicts)
    assert not balance_suspects_pin(pts)


def test_skewed_gauges_swinging_either_way_are_not_a_pin():
    # the decode side refreshed a sample late: each room shows +1 on the prefill, then -1 once the prefill let go
    # (the prefill inflight queue never empties: only the median keeps this from a pin)
    pts, gen = [], 0.0
    for k in range(40):
        pre, dec = {0: (2, 1), 1: (1, 1), 2: (1, 2), 3: (1, 1)}[k % 4]
        gen += 8
        pts.append(point(float(k), 1.0, float(pre), float(dec), gen))
    v, _ = judge_points(pts, 20.0)
    assert v.verdict == "busy" and v.pinned_by == "" and v.balance_median < 1


def test_a_balance_of_one_with_the_inflight_queue_emptying_is_not_a_pin():
    # the prefill holds one more room than the decode (e.g. waiting for a bootstrap) but its inflight queue drains
    pts = [point(float(k), 1.0 if k % 3 else 0.0, 2.0, 1.0, 10.0 * k) for k in range(35)]
    v, _ = judge_points(pts, 20.0)
    assert v.verdict == "busy" and v.balance_median == 1


def test_the_balance_needs_its_whole_window_and_says_so():
    pts = [point(float(k), 1.0, 1.0 + k % 2, float(k % 2), 10.0 * k) for k in range(21)]  # 20 s of a pin
    v, _ = judge_points(pts, 20.0)
    assert v.verdict == "busy" and any("needs 30.0s" in n for n in v.notes)
    assert balance_suspects_pin(pts)  # the cue for sample_inflight to keep sampling
    more = pts + [point(float(k), 1.0, 1.0 + k % 2, float(k % 2), 10.0 * k) for k in range(21, 31)]
    v, _ = judge_points(more, 20.0)
    assert v.verdict == "pinned" and v.pinned_by == ROOM_BALANCE and v.conclusive


def test_without_the_balance_gauges_the_old_rule_stands():
    pts = [
        Point(t=float(k), gauges={INF: 1.0}, generation_tokens=10.0 * k, per_worker={}, counters={}, gen_throughput={})
        for k in range(40)
    ]
    v, _ = judge_points(pts, 20.0)
    assert v.verdict == "busy" and v.balance_median is None
    assert any("no cross-side room balance" in n for n in v.notes)
    idle = [
        Point(t=float(k), gauges={INF: 1.0}, generation_tokens=5.0, per_worker={}, counters={}, gen_throughput={})
        for k in range(10)
    ]
    v, _ = judge_points(idle, 9.0)
    assert v.verdict == "pinned" and v.pinned_by == NO_PROGRESS
    assert "NO decode progress" in v.summary


def lagged(points, lag):
    """The same series with the decode side's rooms read `lag` samples late (SGLang refreshes each side's gauges at
    its own log interval, so one side can show a room the other has already let go)."""
    out = []
    for i, p in enumerate(points):
        d = points[max(0, i - lag)].decode_rooms
        out.append(
            Point(
                t=p.t,
                gauges=p.gauges,
                generation_tokens=p.generation_tokens,
                per_worker={},
                counters={},
                gen_throughput={},
                prefill_rooms=p.prefill_rooms,
                decode_rooms=d,
            )
        )
    return out


@pytest.mark.parametrize("lag", [1, 2, 3])
def test_recorded_series_with_the_decode_refresh_lagging(lag):
    calm = lagged(recorded("pinload-fixed-load.jsonl"), lag)
    assert {v.verdict for _t, v in sliding(calm, 20.0)} <= {"busy", "drained"}
    pinned = sliding(lagged(recorded("pinload-racy-pin.jsonl"), lag), 20.0)[-1][1]
    assert pinned.verdict == "pinned" and pinned.pinned_by == ROOM_BALANCE
