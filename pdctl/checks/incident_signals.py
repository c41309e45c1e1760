"""The signals the incident write-up charts, as series over the window, from the watch's `{"event": "sample"}` and
`{"event": "pair"}` lines (pdctl.checks.watch_events.Sampled, PairCanaryDone): each worker's PD queues and running
requests, its KV transfer and bootstrap failure counters, each pair canary's latency and result. A sample line is
written when a value changes, so a series holds its value until the next point (a step). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

#: (unix time, value)
Points = list[tuple[float, float]]


@dataclass(frozen=True)
class Canary:
    t: float
    status: str  # pass | fail | unknown
    latency_s: float | None


@dataclass
class Signals:
    queued: dict[str, Points] = field(default_factory=dict)  # worker label -> PD queue gauges summed
    running: dict[str, Points] = field(default_factory=dict)  # decode label -> running requests
    transfer_failed: dict[str, Points] = field(default_factory=dict)  # worker label -> counter as read
    bootstrap_failed: dict[str, Points] = field(default_factory=dict)
    canaries: dict[str, list[Canary]] = field(default_factory=dict)  # "prefill -> decode" -> its canaries
    marks: list[tuple[float, str]] = field(default_factory=list)  # (t, "heal done") drawn across every chart

    @property
    def sampled(self) -> bool:
        """Any sample line in the window (a watch older than the sample lines writes none)."""
        return bool(self.queued or self.transfer_failed)

    def gaps(self) -> list[str]:
        """What could not be charted, and why."""
        out = []
        if not self.sampled:
            out.append(
                'no queue or KV failure samples in the window: the timeline has no {"event": "sample"} lines '
                "(no --timeline given, a watch older than them, or no watch running then)"
            )
        if not self.canaries:
            out.append('no pair canary in the window: the timeline has no {"event": "pair"} lines')
        return out


def signals(lines: Sequence[Mapping[str, Any]], since: float, until: float) -> Signals:
    """The series within [since, until]; each worker's last sample before `since` opens its series at `since`, so
    a value set before the window is drawn from its start."""
    out = Signals()
    before: dict[str, Mapping[str, Any]] = {}
    for x in lines:
        t = float(x["t"])
        if t > until:
            break
        event = x.get("event")
        if event == "sample":
            if t < since:
                before[str(x.get("target", ""))] = x
                continue
            _add_sample(out, t, x)
        elif event == "pair" and t >= since:
            pair = f"{x.get('prefill', '')} -> {x.get('decode', '')}"
            lat = x.get("latency_s")
            latency = float(lat) if isinstance(lat, (int, float)) and not isinstance(lat, bool) else None
            out.canaries.setdefault(pair, []).append(Canary(t, str(x.get("status", "unknown")), latency))
    for target, x in before.items():  # opened at the window's start, ahead of the points inside it
        _add_sample(out, since, x, first=True)
    return out


def _num(x: Mapping[str, Any], key: str) -> float | None:
    v = x.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _add_sample(out: Signals, t: float, x: Mapping[str, Any], *, first: bool = False) -> None:
    target = str(x.get("target", ""))
    for key, series in (
        ("queued", out.queued),
        ("transfer_failed", out.transfer_failed),
        ("bootstrap_failed", out.bootstrap_failed),
    ):
        v = _num(x, key)
        if v is not None:
            pts = series.setdefault(target, [])
            pts.insert(0, (t, v)) if first else pts.append((t, v))
    running = _num(x, "running")
    if running is not None and target.startswith("decode"):
        pts = out.running.setdefault(target, [])
        pts.insert(0, (t, running)) if first else pts.append((t, running))
