"""The SGLang 0.5.23 metric families the bundled engine exposes: name, type, extra labels, buckets and help text
exactly as SGLang declares them (shared/reference/captures/*.prom and real-sglang-cpu/*.prom; labels and buckets of
the families no capture shows from SGLang's metrics collector). A family the engine cannot feed honestly is not
listed here: docs/engine.md ("Metrics") says which and why.

`modes` says where a family is fed: "all", "pd" (prefill and decode: it needs the paged KV pool), or a comma list
of modes (null, prefill, decode). SGLang declares every family in every mode; here a family a mode never feeds is
left out (a prefill has no decode queue, a decode no bootstrap queue). A declared family shows in /metrics only once
it has a series (engine/metrics.py), as in SGLang's multiprocess mode: TTFT and TPOT, declared on a prefill, never
show there (SGLang's prefill workers never observe them), nor a failure counter before its first failure.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHED_LABELS = ("model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank")
TOK_LABELS = ("model_name", "engine_type")

KV_MS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500)
QUEUE_S = (
    0.0,
    0.001,
    0.005,
    0.01,
    0.05,
    0.1,
    0.2,
    0.5,
    1,
    2,
    3,
    4,
    5,
    10,
    15,
    20,
    30,
    40,
    50,
    60,
    70,
    80,
    90,
    100,
    200,
    300,
    400,
    500,
    600,
    700,
    800,
    900,
    1000,
    1200,
    1400,
    1600,
    1800,
    2000,
    2500,
    3000,
)
STAGE_S = tuple(0.001 * 1.62**i for i in range(30))  # exponential_buckets(0.001, 1.62, 30)
TOKENS = (
    100,
    300,
    500,
    700,
    1000,
    1500,
    2000,
    3000,
    4000,
    5000,
    6000,
    7000,
    8000,
    9000,
    10000,
    12500,
    15000,
    17500,
    20000,
    22500,
    25000,
    27500,
    30000,
    35000,
    40000,
    60000,
    80000,
    100000,
    200000,
    300000,
    400000,
    600000,
    800000,
    1000000,
    1100000,
)
TTFT_S = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_S = TTFT_S + (600, 1200, 1800, 2400)
ITL_S = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.010,
    0.015,
    0.020,
    0.025,
    0.030,
    0.035,
    0.040,
    0.060,
    0.080,
    0.100,
    0.200,
    0.400,
    0.600,
    0.800,
    1.000,
    2.000,
    4.000,
    6.000,
    8.000,
)

# per_stage_req_latency_seconds{stage}: the stages SGLang observes (RequestStage with metrics_is_observed).
STAGES = {
    "null": ("request_process", "prefill_forward", "chunked_prefill"),
    "prefill": ("prefill_bootstrap", "prefill_forward", "chunked_prefill", "prefill_transfer_kv_cache"),
    "decode": ("decode_prepare", "decode_bootstrap", "decode_waiting", "decode_transferred", "fake_output"),
}


@dataclass(frozen=True)
class Fam:
    name: str  # without the "sglang:" prefix; a counter's name ends in _total as SGLang declares it
    kind: str  # gauge, counter, histogram
    help: str
    tok: bool = False  # tokenizer-side labels (model_name, engine_type) instead of the scheduler's
    extra: tuple[str, ...] = ()  # label names after the base ones
    buckets: tuple[float, ...] | None = None
    modes: str = "all"

    def fed_in(self, mode: str) -> bool:
        return self.modes == "all" or mode in self.modes.split(",") or (self.modes == "pd" and mode != "null")


def _g(name, help, modes="all"):
    return Fam(name, "gauge", help, modes=modes)


def _c(name, help, modes="all", extra=()):
    return Fam(name, "counter", help, extra=extra, modes=modes)


def _h(name, help, buckets, modes="all", extra=()):
    return Fam(name, "histogram", help, extra=extra, buckets=tuple(buckets), modes=modes)


FAMILIES: tuple[Fam, ...] = (
    # scheduler: basics, pool, PD queues
    _g("num_running_reqs", "The number of running requests."),
    _g("num_queue_reqs", "The number of requests in the waiting queue."),
    _g("gen_throughput", "The generation throughput (token/s).", "null,decode"),
    _g("decode_sum_seq_lens", "The sum of all sequence lengths in decode.", "null,decode"),
    _g("token_usage", "The token usage.", "pd"),
    _g("full_token_usage", "The token usage for full attention layers.", "pd"),
    _g("num_used_tokens", "The number of used tokens.", "pd"),
    _g("kv_available_tokens", "Number of free token slots in the KV cache pool.", "pd"),
    _g("kv_used_tokens", "Number of actively used token slots in the KV cache pool.", "pd"),
    _g("num_prefill_bootstrap_queue_reqs", "The number of requests in the prefill bootstrap queue.", "prefill"),
    _g("num_prefill_inflight_queue_reqs", "The number of requests in the prefill inflight queue.", "prefill"),
    _g("num_decode_prealloc_queue_reqs", "The number of requests in the decode prealloc queue.", "decode"),
    _g("num_decode_transfer_queue_reqs", "The number of requests in the decode transfer queue.", "decode"),
    _h(
        "kv_transfer_speed_gb_s",
        "Histogram of KV cache transfer speed in GB/s.",
        (0.1, 0.5, 1, 5, 10, 25, 50, 100, 200, 400),
        "prefill",
    ),
    _h("kv_transfer_latency_ms", "Histogram of KV cache transfer latency in ms.", KV_MS + (5000,), "prefill"),
    _g(
        "pending_prealloc_token_usage",
        "The token usage for pending preallocated tokens (not preallocated yet).",
        "decode",
    ),
    _g(
        "prealloc_full_token_usage",
        "Share of the full-attention KV pool held by decode requests whose KV transfer "
        "is pending (preallocated, not yet running); same capacity basis as sglang:full_token_usage.",
        "decode",
    ),
    _c("num_bootstrap_failed_reqs_total", "The number of bootstrap failed requests.", "pd"),
    _c("num_transfer_failed_reqs_total", "The number of transfer failed requests.", "pd"),
    _h("kv_transfer_bootstrap_ms", "Histogram of KV transfer bootstrap time in ms.", KV_MS, "pd"),
    _h("kv_transfer_alloc_ms", "Histogram of KV transfer allocation waiting time in ms.", KV_MS, "decode"),
    _h(
        "kv_transfer_total_mb",
        "Histogram of KV cache transfer size in MB.",
        (1, 5, 10, 50, 100, 500, 1000, 5000, 10000),
        "prefill",
    ),
    # scheduler: latency, time accounting
    _h("queue_time_seconds", "Histogram of queueing time in seconds.", QUEUE_S),
    _h("per_stage_req_latency_seconds", "The latency of each stage of requests.", STAGE_S, extra=("stage",)),
    _c(
        "realtime_tokens_total",
        "Total number of tokens processed (updated on each log interval). mode: "
        "prefill_compute, prefill_cache, decode.",
        extra=("mode",),
    ),
    _c(
        "prefill_effective_tokens_total",
        "Effective prefill tokens with retracted-request re-counts excluded, "
        "updated on each log interval. mode: device_hit, host_hit, storage_hit, input. Windowed prefix cache hit "
        "rate = rate(sum of *_hit) / rate(sum of all modes); per-tier rate uses a single *_hit mode in the "
        "numerator.",
        extra=("mode",),
        modes="null,prefill",
    ),
    _c(
        "forward_execution_seconds_total",
        "Total time that GPU is busy executing model forward passes. Refer to ForwardMode for category labels.",
        extra=("category",),
    ),
    _c("scheduler_idle_seconds_total", "Total wall time while the scheduler has no runnable or queued work."),
    _c("scheduler_process_cpu_seconds_total", "Total CPU time consumed by the scheduler process across all threads."),
    # scheduler: constants
    _g("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", "pd"),
    _g("weight_memory_usage_gb", "Memory used by model weights in GB."),
    _g("kv_cache_memory_usage_gb", "Memory used by the KV cache pools in GB.", "pd"),
    _g("page_size", "KV cache page size in tokens.", "pd"),
    _g("num_pages", "Number of KV cache pages.", "pd"),
    _g("context_len", "Maximum context length."),
    # tokenizer side
    Fam("startup_time_seconds", "gauge", "Engine startup duration by phase in seconds.", tok=True, extra=("phase",)),
    Fam("prompt_tokens_total", "counter", "Number of prefill tokens processed.", tok=True, extra=("is_streaming",)),
    Fam(
        "generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        tok=True,
        extra=("is_streaming",),
        modes="null,decode",
    ),
    Fam("prompt_tokens_histogram", "histogram", "Histogram of prompt token length.", tok=True, buckets=TOKENS),
    Fam(
        "uncached_prompt_tokens_histogram",
        "histogram",
        "Histogram of uncached (compute) prompt token length.",
        tok=True,
        buckets=TOKENS,
    ),
    Fam(
        "generation_tokens_histogram",
        "histogram",
        "Histogram of generation token length.",
        tok=True,
        buckets=TOKENS,
        modes="null,decode",
    ),
    Fam("num_requests_total", "counter", "Number of requests processed.", tok=True, extra=("is_streaming",)),
    Fam("num_aborted_requests_total", "counter", "Number of requests aborted.", tok=True),
    Fam(
        "time_to_first_token_seconds",
        "histogram",
        "Histogram of time to first token in seconds.",
        tok=True,
        extra=("is_streaming",),
        buckets=TTFT_S,
    ),
    Fam(
        "inter_token_latency_seconds",
        "histogram",
        "Histogram of inter-token latency in seconds.",
        tok=True,
        buckets=ITL_S,
        modes="null,decode",
    ),
    Fam(
        "request_time_per_output_token_seconds",
        "histogram",
        "Per-request TPOT in seconds: (finished_time - first_token_time) / (completion_tokens - 1).",
        tok=True,
        extra=("is_streaming",),
        buckets=ITL_S,
    ),
    Fam(
        "e2e_request_latency_seconds",
        "histogram",
        "Histogram of End-to-end request latency in seconds",
        tok=True,
        extra=("is_streaming",),
        buckets=E2E_S,
    ),
    Fam(
        "get_loads_duration_seconds",
        "histogram",
        "Time spent serving /v1/loads requests (seconds).",
        tok=True,
        buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0),
    ),
)
