"""Prometheus metrics with SGLang's names, types and label sets (see shared/reference/captures).

Scheduler-side families carry model_name, engine_type, tp_rank, pp_rank, moe_ep_rank; tokenizer-side
families (requests, tokens, aborted, TTFT, e2e) carry model_name and engine_type only, as upstream.
Each process owns a private registry so tests can build several.
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

SCHED_LABELS = ["model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"]
TOK_LABELS = ["model_name", "engine_type"]

GAUGES = {
    "num_running_reqs": "The number of running requests.",
    "num_queue_reqs": "The number of requests in the waiting queue.",
    "gen_throughput": "The generation throughput (token/s).",
    "token_usage": "The token usage.",
    "num_prefill_bootstrap_queue_reqs": "The number of requests in the prefill bootstrap queue.",
    "num_prefill_inflight_queue_reqs": "The number of requests in the prefill inflight queue.",
    "num_decode_prealloc_queue_reqs": "The number of requests in the decode prealloc queue.",
    "num_decode_transfer_queue_reqs": "The number of requests in the decode transfer queue.",
}
SCHED_COUNTERS = {
    "num_transfer_failed_reqs": "The number of transfer failed requests.",
    "num_bootstrap_failed_reqs": "The number of bootstrap failed requests.",
    "num_prefill_retries": "The number of prefill retries.",
}
TOK_COUNTERS = {
    "num_requests": "Number of requests processed.",
    "num_aborted_requests": "Number of requests aborted.",
    "prompt_tokens": "Number of prefill tokens processed.",
    "generation_tokens": "Number of generation tokens processed.",
}
KV_HISTOGRAMS = {
    "kv_transfer_latency_ms": ("The transfer latency of the KV cache (ms).",
                               [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000]),
    "kv_transfer_speed_gb_s": ("The transfer speed of the KV cache (GB/s).", [0.1, 0.5, 1, 5, 10, 25, 50, 100, 200, 400]),
    "kv_transfer_total_mb": ("The transfer size of the KV cache (MB).", [1, 5, 10, 50, 100, 500, 1000, 5000, 10000]),
    "kv_transfer_bootstrap_ms": ("The bootstrap time of the KV transfer (ms).",
                                 [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500]),
}
LATENCY_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
TOK_HISTOGRAMS = {
    "time_to_first_token_seconds": "Histogram of time to first token in seconds.",
    "e2e_request_latency_seconds": "Histogram of End-to-end request latency in seconds",
}


class Metrics:
    """Holds labelled children; engine_type is prefill, decode or unified (null mode)."""

    def __init__(self, model_name: str, mode: str):
        self.registry = CollectorRegistry()
        et = {"null": "unified"}.get(mode, mode)
        sl = dict(model_name=model_name, engine_type=et, tp_rank="0", pp_rank="0", moe_ep_rank="0")
        tl = dict(model_name=model_name, engine_type=et)
        r = self.registry
        self.g = {n: Gauge(f"sglang:{n}", d, SCHED_LABELS, registry=r).labels(**sl) for n, d in GAUGES.items()}
        self.c = {n: Counter(f"sglang:{n}", d, SCHED_LABELS, registry=r).labels(**sl) for n, d in SCHED_COUNTERS.items()}
        self.c.update({n: Counter(f"sglang:{n}", d, TOK_LABELS, registry=r).labels(**tl) for n, d in TOK_COUNTERS.items()})
        self.h = {n: Histogram(f"sglang:{n}", d, SCHED_LABELS, buckets=b, registry=r).labels(**sl)
                  for n, (d, b) in KV_HISTOGRAMS.items()}
        self.h.update({n: Histogram(f"sglang:{n}", d, TOK_LABELS, buckets=LATENCY_BUCKETS, registry=r).labels(**tl)
                       for n, d in TOK_HISTOGRAMS.items()})

    def set(self, name: str, value: float) -> None:
        self.g[name].set(value)

    def inc(self, name: str, by: float = 1) -> None:
        self.c[name].inc(by)

    def observe(self, name: str, value: float) -> None:
        self.h[name].observe(value)

    def render(self) -> bytes:
        return generate_latest(self.registry)
