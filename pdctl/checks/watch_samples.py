"""Which of the watch's inflight samples go into its timeline as `{"event": "sample"}` lines: the signals the incident
write-up charts (a worker's queues and its KV failure counters), written as changes so a quiet deployment adds
nothing to the timeline and a busy one at most a line per worker every SAMPLE_EVERY_S (a counter that moves is
written at once: it is the incident's own signal). Pure: the caller gives the time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pdctl.checks.inflight import Point
from pdctl.checks.metric_names import (
    DECODE_PREALLOC_QUEUE,
    DECODE_TRANSFER_QUEUE,
    NUM_RUNNING_REQS,
    PREFILL_BOOTSTRAP_QUEUE,
    PREFILL_INFLIGHT_QUEUE,
)
from pdctl.checks.watch_events import Sampled

SAMPLE_EVERY_S = 5.0  # the least time between two lines of one worker whose queues alone moved
QUEUE_GAUGES = (PREFILL_BOOTSTRAP_QUEUE, PREFILL_INFLIGHT_QUEUE, DECODE_PREALLOC_QUEUE, DECODE_TRANSFER_QUEUE)

#: (queued, running, transfer_failed, bootstrap_failed) of one worker
Values = tuple[float, float, float, float]


@dataclass
class SampleLog:
    """What was last written per worker: (unix time, values)."""

    written: dict[str, tuple[float, Values]] = field(default_factory=dict)

    def lines(self, point: Point, t: float, deployment: str) -> list[Sampled]:
        """The sample lines of one point read at unix time `t`: a worker's first, or one whose counters moved, or
        whose queues moved and whose last line is SAMPLE_EVERY_S old. A worker not read in this point has none."""
        out: list[Sampled] = []
        for label, gauges in point.per_worker.items():
            counters = point.counters.get(label, {})
            now: Values = (
                sum(gauges.get(g, 0.0) for g in QUEUE_GAUGES),
                gauges.get(NUM_RUNNING_REQS, 0.0),
                counters.get("transfer_failed", 0.0),
                counters.get("bootstrap_failed", 0.0),
            )
            last = self.written.get(label)
            if last is not None:
                at, was = last
                if was == now or (was[2:] == now[2:] and t - at < SAMPLE_EVERY_S):
                    continue
            self.written[label] = (t, now)
            out.append(Sampled(t, deployment, label, *now))
        return out
