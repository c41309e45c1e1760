"""Prometheus metrics as SGLang 0.5.23 exposes them: the families of engine/metric_families.py, with SGLang's
labels (scheduler side: model_name, engine_type, tp_rank, pp_rank, moe_ep_rank; tokenizer side: model_name,
engine_type). Each process owns a private registry so tests can build several. Feeding a family this mode does not
declare is a no-op, so one code path serves every mode.

SGLang serves its metrics in prometheus_client's multiprocess mode, and the render here shows what that mode shows:
- a series exists from the first time it is fed (set, inc or observe), never before: a failure counter such as
  `num_transfer_failed_reqs_total` has no series, and no HELP/TYPE lines either, until the first failure; only the
  series SGLang creates at start-up (PRECREATED) exist from the start;
- a family without any series is not rendered at all;
- there are no `_created` samples.
"""

from __future__ import annotations

from typing import TypeVar, Union

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric

from engine.metric_families import FAMILIES, SCHED_LABELS, TOK_LABELS, Fam

_KINDS = {"gauge": Gauge, "counter": Counter, "histogram": Histogram}
# Series SGLang 0.5.23's metrics collector creates when it starts (`.labels(...)` without a value), so they show at
# rest: the scheduler's idle and CPU time counters, and the modes of prefill_effective_tokens_total.
PRECREATED = ("scheduler_idle_seconds_total", "scheduler_process_cpu_seconds_total")
Series = Union[Gauge, Counter, Histogram]  # a family, or one labelled series of it (the same class)
_S = TypeVar("_S", Gauge, Counter, Histogram)


class _AsMultiprocess:
    """A registry seen as SGLang's multiprocess collector shows it: no `_created` samples, no empty families."""

    def __init__(self, registry: CollectorRegistry):
        self.registry = registry

    def collect(self):
        for fam in self.registry.collect():
            samples = [s for s in fam.samples if not s.name.endswith("_created")]
            if not samples:
                continue
            out = Metric(fam.name, fam.documentation, fam.type, fam.unit)
            out.samples = samples
            yield out


class Metrics:
    """engine_type is prefill, decode or unified (null mode), as SGLang labels it."""

    def __init__(self, model_name: str, mode: str):
        self.registry = CollectorRegistry()
        self._view = _AsMultiprocess(self.registry)
        self.mode = mode
        et = {"null": "unified"}.get(mode, mode)
        self._sched = dict(model_name=model_name, engine_type=et, tp_rank="0", pp_rank="0", moe_ep_rank="0")
        self._tok = dict(model_name=model_name, engine_type=et)
        self.fams: dict[str, Fam] = {}
        self._metric: dict[str, Series] = {}
        self._child: dict[tuple, Series] = {}
        self.last: dict[str, float] = {}  # the last value each histogram observed (/v1/loads reads a few)
        self._gauge_value: dict[str, float] = {}  # the last value set() gave each gauge without extra labels
        for f in FAMILIES:
            if f.fed_in(mode):
                self._declare(f)
        for name in PRECREATED:
            if self.has(name):
                self.child(name)
        if self.has("prefill_effective_tokens_total"):  # SGLang seeds its modes at 0; the engine has only input
            self.child("prefill_effective_tokens_total", mode="input")

    def _declare(self, f: Fam) -> None:
        base = TOK_LABELS if f.tok else SCHED_LABELS
        kw = {"buckets": f.buckets} if f.buckets else {}
        self._metric[f.name] = _KINDS[f.kind](
            f"sglang:{f.name}", f.help, [*base, *f.extra], registry=self.registry, **kw
        )
        self.fams[f.name] = f

    def has(self, name: str) -> bool:
        return name in self.fams

    def child(self, name: str, **extra: str) -> Series:
        """The series of `name` with these extra labels, created (as a first feed does) if it does not exist yet."""
        key = (name, *sorted(extra.items()))
        c = self._child.get(key)
        if c is None:
            f = self.fams[name]
            c = self._child[key] = self._metric[name].labels(**(self._tok if f.tok else self._sched), **extra)
        return c

    def _series(self, name: str, kind: type[_S], **extra: str) -> _S:
        """child(), checked against the family's kind before a series is created."""
        if not isinstance(self._metric[name], kind):
            raise TypeError(f"sglang:{name} is a {self.fams[name].kind}, not a {kind.__name__.lower()}")
        c = self.child(name, **extra)
        if not isinstance(c, kind):  # labels() makes a series of its family's class
            raise TypeError(f"sglang:{name}: a series of another kind than its family")
        return c

    def counter(self, name: str, **extra: str) -> Counter:
        return self._series(name, Counter, **extra)

    def histogram(self, name: str, **extra: str) -> Histogram:
        return self._series(name, Histogram, **extra)

    def set(self, name: str, value: float, **extra: str) -> None:
        if name in self.fams:
            self._series(name, Gauge, **extra).set(value)
            if not extra:
                self._gauge_value[name] = value

    def inc(self, name: str, by: float = 1, **extra: str) -> None:
        name = name if name in self.fams else name + "_total"  # callers may name a counter without _total
        if name in self.fams and by >= 0:
            if self.fams[name].kind == "gauge":
                self._series(name, Gauge, **extra).inc(by)
            else:
                self._series(name, Counter, **extra).inc(by)

    def observe(self, name: str, value: float, **extra: str) -> None:
        if name in self.fams:
            self.histogram(name, **extra).observe(value)
            self.last[name] = value

    def value(self, name: str, default: float = 0.0) -> float:
        """The current value of a gauge without extra labels (server_info reads these); `default` while the gauge
        has no series yet (reading creates none)."""
        return self._gauge_value.get(name, default)

    def render(self) -> bytes:
        return generate_latest(self._view)
