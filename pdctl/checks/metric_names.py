"""The SGLang Prometheus metric names pdctl reads, in one place (names as SGLang 0.5.23 exposes them).

Labels on scheduler metrics: model_name, engine_type (prefill|decode|unified), tp_rank, pp_rank, moe_ep_rank
[, dp_rank]. Tokenizer metrics (requests, tokens, aborts) carry only model_name and engine_type.
"""

from __future__ import annotations

# PD queue gauges (scheduler, per tp_rank). There is no num_prefill_prealloc_queue_reqs.
PREFILL_BOOTSTRAP_QUEUE = "sglang:num_prefill_bootstrap_queue_reqs"
PREFILL_INFLIGHT_QUEUE = "sglang:num_prefill_inflight_queue_reqs"
DECODE_PREALLOC_QUEUE = "sglang:num_decode_prealloc_queue_reqs"
DECODE_TRANSFER_QUEUE = "sglang:num_decode_transfer_queue_reqs"
NUM_RUNNING_REQS = "sglang:num_running_reqs"
NUM_QUEUE_REQS = "sglang:num_queue_reqs"
GEN_THROUGHPUT = "sglang:gen_throughput"

PD_QUEUE_GAUGES = (PREFILL_BOOTSTRAP_QUEUE, PREFILL_INFLIGHT_QUEUE, DECODE_PREALLOC_QUEUE, DECODE_TRANSFER_QUEUE)
#: what `verify inflight` samples: the PD queues plus running requests
INFLIGHT_GAUGES = PD_QUEUE_GAUGES + (NUM_RUNNING_REQS,)

# Failure counters (scheduler, per tp_rank): must be 0, or not increased since a baseline.
TRANSFER_FAILED = "sglang:num_transfer_failed_reqs_total"
BOOTSTRAP_FAILED = "sglang:num_bootstrap_failed_reqs_total"
FAILURE_COUNTERS = (TRANSFER_FAILED, BOOTSTRAP_FAILED)
# A labelled counter has no series until its first increment in real SGLang (prometheus_client's multiprocess
# mode): an absent failure counter is 0 failures on a server whose metrics are on, which these witness (the
# scheduler's idle counter exists from its start; its gauges only from its first stats log, once it served).
# The transfer read asks for the counters and the witnesses.
METRICS_ON_WITNESSES = ("sglang:scheduler_idle_seconds_total", NUM_RUNNING_REQS)
TRANSFER_READ = (*FAILURE_COUNTERS, *METRICS_ON_WITNESSES)


def metrics_on(metrics) -> bool:
    """The server's metrics are on: one of METRICS_ON_WITNESSES is in `metrics` (a MetricSet)."""
    return any(metrics.has(name) for name in METRICS_ON_WITNESSES)


# Tokenizer counters (no tp_rank label).
GENERATION_TOKENS = "sglang:generation_tokens_total"
NUM_ABORTED_REQUESTS = "sglang:num_aborted_requests_total"

# A histogram on the prefill side.
KV_TRANSFER_LATENCY_MS = "sglang:kv_transfer_latency_ms"

#: the hint when a family pdctl needs is absent: SGLang serves /metrics only with this flag
ENABLE_METRICS_HINT = "start the server with --enable-metrics (without it SGLang serves no /metrics)"
