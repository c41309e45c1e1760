"""`verify inflight`: sample every prefill's and decode's /metrics over a window and judge drained / busy / pinned.

One sample = one parallel read of every worker's /metrics, reduced by checks.inflight.inflight_point (PD queue gauges
at tp_rank 0, summed; decode generation tokens) plus, per worker, the same gauges and the failure counters, so that a
pinned verdict can name the worker holding the room. Used by `pdctl verify inflight`, the optional "inflight" layer
of final-health, `pdctl storm` (its time series) and `pdctl triage`.

Every loop is bounded: at most window/interval + 2 samples, each read with the inventory's metrics timeout. Ctrl-C
(KeyboardInterrupt) inside the sampling loop stops it; the partial series is judged and marked partial.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from pdctl.checks.inflight import InflightVerdict, inflight_point, judge_inflight
from pdctl.checks.metric_names import (BOOTSTRAP_FAILED, GEN_THROUGHPUT, GENERATION_TOKENS, INFLIGHT_GAUGES,
                                       TRANSFER_FAILED)
from pdctl.checks.result import CheckResult, Status
from pdctl.ops.context import Deployment
from pdctl.ops.defaults import INFLIGHT_INTERVAL_S, INFLIGHT_WINDOW_S



@dataclass
class Point:
    """One sample of every worker, `t` seconds on the caller's clock (monotonic)."""

    t: float
    gauges: dict[str, float]                      # summed over workers (checks.inflight.inflight_point)
    generation_tokens: float | None               # decode side total
    per_worker: dict[str, dict[str, float]]       # label -> its PD gauges (tp_rank 0)
    counters: dict[str, dict[str, float]]         # label -> {transfer_failed, bootstrap_failed, generation_tokens}
    gen_throughput: dict[str, float]              # decode label -> sglang:gen_throughput (when exposed)
    errors: dict[str, str] = field(default_factory=dict)   # label -> why its metrics could not be read

    @property
    def complete(self) -> bool:
        return not self.errors

    @property
    def inflight(self) -> float:
        return math.fsum(v for v in self.gauges.values())

    def counter_total(self, key: str) -> float:
        return math.fsum(c.get(key, 0.0) for c in self.counters.values())

    def to_dict(self) -> dict[str, Any]:
        return {"t": round(self.t, 3), "gauges": self.gauges, "generation_tokens": self.generation_tokens,
                "per_worker": self.per_worker, "counters": self.counters, "gen_throughput": self.gen_throughput,
                "errors": self.errors}


def _counter(m, name: str) -> float:
    v = m.value(name)
    return 0.0 if v is None else float(v)


def worker_labels(dep: Deployment) -> list[tuple[str, int, str]]:
    return [(r, i, dep.inv.label(r, i)) for r, i, _ in dep.inv.instances() if r in ("prefill", "decode")]


def read_point(dep: Deployment, t0: float = 0.0, *, clock: Callable[[], float] = time.monotonic) -> Point:
    """Read every prefill's and decode's /metrics once, in parallel. Never raises for an unreachable worker: its
    error goes to `errors` (a point with errors is not used for a verdict)."""
    from pdctl.checks.sampling import fetch_metrics

    timeout = dep.inv.final_health.metrics_timeout
    workers = worker_labels(dep)

    def one(role: str, i: int):
        try:
            return fetch_metrics(dep.base_url(role, i), timeout=timeout)
        except Exception as e:  # PdctlError or a transport failure: recorded per worker
            return e

    t = clock() - t0
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(workers)))) as ex:
        futs = [(role, label, ex.submit(one, role, i)) for role, i, label in workers]
        got = [(role, label, f.result()) for role, label, f in futs]
    prefill_sets, decode_sets = [], []
    per_worker: dict[str, dict[str, float]] = {}
    counters: dict[str, dict[str, float]] = {}
    thr: dict[str, float] = {}
    errors: dict[str, str] = {}
    for role, label, m in got:
        if isinstance(m, Exception):
            errors[label] = (getattr(m, "message", None) or str(m) or type(m).__name__).splitlines()[0]
            continue
        (prefill_sets if role == "prefill" else decode_sets).append(m)
        g, _gen = inflight_point([m], []) if role == "prefill" else inflight_point([], [m])
        per_worker[label] = g
        counters[label] = {"transfer_failed": _counter(m, TRANSFER_FAILED),
                           "bootstrap_failed": _counter(m, BOOTSTRAP_FAILED)}
        if role == "decode":
            counters[label]["generation_tokens"] = _counter(m, GENERATION_TOKENS)
            v = m.value(GEN_THROUGHPUT, tp_rank="0")
            if v is not None:
                thr[label] = float(v)
    gauges, gen = inflight_point(prefill_sets, decode_sets)
    return Point(t=t, gauges=gauges, generation_tokens=gen, per_worker=per_worker, counters=counters,
                 gen_throughput=thr, errors=errors)


@dataclass
class InflightReport:
    window_s: float
    interval_s: float
    points: list[Point]
    verdict: InflightVerdict | None          # None when no complete sample was taken
    partial: bool = False                    # stopped early (Ctrl-C or stop event)
    notes: list[str] = field(default_factory=list)
    t0: float = 0.0                          # the clock reading the samples' t are relative to

    @property
    def name(self) -> str:
        return self.verdict.verdict if self.verdict else "unknown"

    @property
    def pinned(self) -> bool:
        return self.verdict is not None and self.verdict.verdict == "pinned" and self.verdict.conclusive

    def holders(self) -> dict[str, dict[str, float]]:
        """Which workers hold nonzero gauges at the last complete sample (the evidence of a pin)."""
        last = next((p for p in reversed(self.points) if p.complete), None)
        if last is None:
            return {}
        return {label: {k: v for k, v in g.items() if v} for label, g in last.per_worker.items() if any(g.values())}

    def exit_code(self) -> int:
        """0 drained, 0 busy (a warning), 1 pinned (conclusive), 1 nothing could be read."""
        if self.verdict is None:
            return 1
        return 1 if self.pinned else 0

    def to_check_results(self) -> list[CheckResult]:
        if self.verdict is None:
            why = "; ".join(f"{k}: {v}" for k, v in (self.points[-1].errors.items() if self.points else [])) \
                or "no sample taken"
            return [CheckResult("inflight", "prefill+decode", "inflight", Status.FAIL, observed="no complete sample",
                                expected="drained, or busy with progress", detail=why)]
        r = self.verdict.to_check_result("prefill+decode")
        if self.pinned and self.holders():
            r.detail += "; held by " + ", ".join(
                f"{label} ({short_gauges(g)})" for label, g in self.holders().items())
        if self.partial:
            r.detail += " (partial: sampling was interrupted)"
            if r.status is Status.FAIL:
                r.status = Status.WARN
        return [r]

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.name, "ok": self.exit_code() == 0, "partial": self.partial,
                "window_s": self.window_s, "interval_s": self.interval_s,
                "judgement": self.verdict.to_dict() if self.verdict else None,
                "holders": self.holders(), "notes": self.notes,
                "samples": [p.to_dict() for p in self.points]}


def judge_points(points: list[Point], window_s: float) -> tuple[InflightVerdict | None, list[str]]:
    """judge_inflight over the complete points (a point with an unreadable worker would fake a queue change)."""
    good = [p for p in points if p.complete]
    notes = []
    if len(good) < len(points):
        notes.append(f"{len(points) - len(good)} sample(s) skipped: a worker's /metrics could not be read")
    if not good:
        return None, notes
    return judge_inflight([(p.t, p.gauges, p.generation_tokens) for p in good], window_s), notes


def sample_inflight(dep: Deployment, window_s: float = INFLIGHT_WINDOW_S, interval_s: float = INFLIGHT_INTERVAL_S, *,
                    stop: threading.Event | None = None, what: str = "inflight samples",
                    clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] | None = None,
                    ) -> InflightReport:
    """Sample every `interval_s` until `window_s` is covered (at most window/interval + 2 reads), then judge.

    Changes nothing on the servers. Ctrl-C or `stop` ends the loop early: the partial series is judged and the
    report marked partial. Raises ValueError on a non-positive window or interval.
    """
    if window_s <= 0 or interval_s <= 0:
        raise ValueError("window and interval must be > 0")
    stop = stop or threading.Event()
    wait = sleep or (lambda s: stop.wait(s))
    t0 = clock()
    points: list[Point] = []
    partial = False
    max_reads = int(math.ceil(window_s / interval_s)) + 2
    try:
        for k in range(max_reads):
            points.append(read_point(dep, t0, clock=clock))
            elapsed = clock() - t0
            dep.progress.waiting(what, elapsed, window_s, detail=_progress_detail(points[-1]))
            if stop.is_set():
                partial = points[-1].t < window_s - 1e-6
                break
            if k > 0 and points[-1].t >= window_s - 1e-6:
                break
            next_t = min((k + 1) * interval_s, window_s)
            wait(max(0.0, next_t - (clock() - t0)) + 0.005)
            if stop.is_set():
                partial = True
                break
    except KeyboardInterrupt:
        partial = True
    verdict, notes = judge_points(points, window_s)
    if partial:
        notes.append("interrupted: the series is partial")
    return InflightReport(window_s, interval_s, points, verdict, partial=partial, notes=notes, t0=t0)


def short_gauges(g: dict[str, float]) -> str:
    """'prefill_inflight_queue=1 running=2' for a gauge dict (zero values left out)."""
    return " ".join(f"{k.removeprefix('sglang:num_').removesuffix('_reqs')}={v:g}" for k, v in g.items() if v)


def _progress_detail(p: Point) -> str:
    if p.errors:
        return f"{len(p.errors)} worker(s) unreadable"
    gen = f", generation_tokens={p.generation_tokens:g}" if p.generation_tokens is not None else ""
    return (short_gauges(p.gauges) or "all queues 0") + gen


def inflight_layer(dep: Deployment, window_s: float = INFLIGHT_WINDOW_S,
                   interval_s: float = INFLIGHT_INTERVAL_S) -> list[CheckResult]:
    """The optional "inflight" layer of final-health. Ctrl-C while sampling re-raises KeyboardInterrupt (the CLI
    exits 130, as `verify inflight` does): an interrupted window is no verdict, and softening it to a warning would
    let final-health exit 0."""
    rep = sample_inflight(dep, window_s, interval_s)
    if rep.partial:       # no stop event here: partial means Ctrl-C
        raise KeyboardInterrupt
    return rep.to_check_results()


__all__ = ["Point", "InflightReport", "read_point", "sample_inflight", "judge_points", "inflight_layer",
           "INFLIGHT_GAUGES"]
