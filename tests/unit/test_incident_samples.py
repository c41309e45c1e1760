"""The watch's sample and pair lines (what `pdctl incident` charts): written as changes, a quiet deployment adds
nothing, a moving counter is written at once, moving queues at most every SAMPLE_EVERY_S."""

from __future__ import annotations

from pdctl.checks.inflight import Point
from pdctl.checks.metric_names import DECODE_TRANSFER_QUEUE, NUM_RUNNING_REQS, PREFILL_INFLIGHT_QUEUE
from pdctl.checks.watch_samples import SAMPLE_EVERY_S, SampleLog
from pdctl.checks.watch_state import WatchState
from pdctl.render.watch_screen import change_line

P, D = "prefill[0]@local:30000", "decode[0]@local:30002"


def _point(queue: float = 0, failed: float = 0, running: float = 0) -> Point:
    return Point(
        t=0.0,
        gauges={},
        generation_tokens=0.0,
        per_worker={P: {PREFILL_INFLIGHT_QUEUE: queue}, D: {DECODE_TRANSFER_QUEUE: 0.0, NUM_RUNNING_REQS: running}},
        counters={P: {"transfer_failed": failed, "bootstrap_failed": 0.0}, D: {"transfer_failed": 0.0}},
        gen_throughput={},
    )


def test_first_sample_then_only_changes():
    log = SampleLog()
    first = log.lines(_point(), 100.0, "dep")
    assert [(x.target, x.queued, x.transfer_failed) for x in first] == [(P, 0.0, 0.0), (D, 0.0, 0.0)]
    assert log.lines(_point(), 101.0, "dep") == []  # quiet: nothing


def test_a_counter_is_written_at_once_queues_at_most_every_few_seconds():
    log = SampleLog()
    log.lines(_point(), 100.0, "dep")
    moved = log.lines(_point(failed=2), 101.0, "dep")
    assert [(x.target, x.transfer_failed) for x in moved] == [(P, 2.0)]
    assert log.lines(_point(queue=3, failed=2), 102.0, "dep") == []  # queues alone, too soon
    later = log.lines(_point(queue=3, failed=2), 101.0 + SAMPLE_EVERY_S, "dep")
    assert [(x.target, x.queued) for x in later] == [(P, 3.0)]


def test_state_writes_pair_lines_as_judged_and_they_are_no_change_lines():
    st = WatchState("dep", 0.0)
    d2 = "decode[1]@local:30004"
    lines = st.apply_pairs([(P, D, "fail", None), (P, d2, "pass", 0.25)], 5.0)
    got = [x.to_line() for x in lines]
    assert [(x["event"], x["decode"], x["status"], x["latency_s"]) for x in got] == [
        ("pair", D, "fail", None),
        ("pair", d2, "pass", 0.25),
    ]
    assert change_line(lines[0]) is None
    samples = st.apply_point(_point(queue=1), 6.0)
    assert [x.to_line()["event"] for x in samples if x.EVENT == "sample"] == ["sample", "sample"]
    assert all(change_line(x) is None for x in samples if x.EVENT == "sample")
