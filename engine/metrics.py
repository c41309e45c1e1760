"""Prometheus metrics as SGLang 0.5.23 exposes them: the families of engine/metric_families.py, with SGLang's
labels (scheduler side: model_name, engine_type, tp_rank, pp_rank, moe_ep_rank; tokenizer side: model_name,
engine_type). A family without extra labels has its series from start-up, as SGLang's; one with extra labels
(stage, mode, is_streaming, ...) gets a series when first fed. Each process owns a private registry so tests can
build several. Feeding a family this mode does not declare is a no-op, so one code path serves every mode.
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from engine.metric_families import FAMILIES, SCHED_LABELS, TOK_LABELS, Fam

_KINDS = {"gauge": Gauge, "counter": Counter, "histogram": Histogram}


class Metrics:
    """engine_type is prefill, decode or unified (null mode), as SGLang labels it."""

    def __init__(self, model_name: str, mode: str):
        self.registry = CollectorRegistry()
        self.mode = mode
        et = {"null": "unified"}.get(mode, mode)
        self._sched = dict(model_name=model_name, engine_type=et, tp_rank="0", pp_rank="0", moe_ep_rank="0")
        self._tok = dict(model_name=model_name, engine_type=et)
        self.fams: dict[str, Fam] = {}
        self._metric: dict[str, object] = {}
        self._child: dict[tuple, object] = {}
        for f in FAMILIES:
            if f.fed_in(mode):
                self._declare(f)
        if self.has("prefill_effective_tokens_total"):  # SGLang seeds its modes at 0; the engine has only input
            self.child("prefill_effective_tokens_total", mode="input")

    def _declare(self, f: Fam) -> None:
        base = TOK_LABELS if f.tok else SCHED_LABELS
        kw = {"buckets": f.buckets} if f.buckets else {}
        self._metric[f.name] = _KINDS[f.kind](f"sglang:{f.name}", f.help, [*base, *f.extra], registry=self.registry,
                                              **kw)
        self.fams[f.name] = f
        if not f.extra:
            self.child(f.name)

    def has(self, name: str) -> bool:
        return name in self.fams

    def child(self, name: str, **extra: str):
        key = (name, *sorted(extra.items()))
        c = self._child.get(key)
        if c is None:
            f = self.fams[name]
            c = self._child[key] = self._metric[name].labels(**(self._tok if f.tok else self._sched), **extra)
        return c

    def set(self, name: str, value: float, **extra: str) -> None:
        if name in self.fams:
            self.child(name, **extra).set(value)

    def inc(self, name: str, by: float = 1, **extra: str) -> None:
        name = name if name in self.fams else name + "_total"   # callers may name a counter without _total
        if name in self.fams and by >= 0:
            self.child(name, **extra).inc(by)

    def observe(self, name: str, value: float, **extra: str) -> None:
        if name in self.fams:
            self.child(name, **extra).observe(value)

    def value(self, name: str, default: float = 0.0) -> float:
        """The current value of a gauge without extra labels (server_info reads these)."""
        return self.child(name)._value.get() if name in self.fams else default

    def render(self) -> bytes:
        return generate_latest(self.registry)
