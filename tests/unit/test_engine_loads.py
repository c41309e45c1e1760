"""/v1/loads as SGLang 0.5.23 shapes it (engine/loads.py), and the sampling defaults of a request body: without the
processes (tests/engine/test_engine_endpoints.py has them on a running PD pair)."""

from __future__ import annotations

import pytest

from engine import __version__, loads
from engine import request_parse as rp
from engine.launch_server import build
from engine.req import Req
from engine.server_args import parse_args

CORE = [
    "timestamp",
    "dp_rank",
    "num_running_reqs",
    "num_waiting_reqs",
    "num_waiting_uncached_tokens",
    "num_used_tokens",
    "num_total_tokens",
    "num_active_tokens",
    "num_prealloc_ready_tokens",
    "max_total_num_tokens",
    "max_running_requests",
    "token_usage",
    "gen_throughput",
    "cache_hit_rate",
    "utilization",
    "total_prefill_uncached_tokens",
    "total_prefill_busy_us",
    "decode_moments",
]


@pytest.fixture(scope="module")
def unified():
    """A unified (null mode) server's state, its scheduler not started: the test moves requests by hand."""
    return build(parse_args(["--disaggregation-mode", "null", "--max-running-requests", "8"]))


def test_snapshot_of_an_idle_unified_server(unified):
    snap = loads.snapshot(unified)
    assert list(snap)[: len(CORE)] == CORE
    assert snap["dp_rank"] == 0 and snap["num_running_reqs"] == snap["num_waiting_reqs"] == 0
    assert snap["max_running_requests"] == 8
    window = unified.scheduler.model.cfg.window
    assert snap["max_total_num_tokens"] == 8 * window == snap["memory"]["token_capacity"]
    assert snap["utilization"] == 0.0 and snap["cache_hit_rate"] == 0.0 and snap["decode_moments"] is None
    assert snap["disaggregation"] == {
        "mode": "null",
        "prefill_bootstrap_queue_reqs": 0,
        "prefill_inflight_queue_reqs": 0,
        "decode_prealloc_queue_reqs": 0,
        "decode_transfer_queue_reqs": 0,
        "decode_retracted_queue_reqs": 0,
        "kv_transfer_speed_gb_s": 0.0,
        "kv_transfer_latency_ms": 0.0,
    }
    assert snap["queues"] == {"waiting": 0, "grammar": 0, "paused": 0, "retracted": 0, "prealloc_ready": 0}
    assert "speculative" not in snap and "lora" not in snap


def test_snapshot_counts_the_waiting_queue_and_a_part_prefilled_prompt(unified):
    s = unified.scheduler
    a = Req(rid="a", input_ids=list(range(40, 140)), max_new_tokens=4, sink=lambda ev: None)
    b = Req(rid="b", input_ids=list(range(40, 70)), max_new_tokens=4, sink=lambda ev: None)
    a.prefill_pos = 64  # its first chunk is computed
    s.waiting[:] = [a, b]
    try:
        snap = loads.snapshot(unified)
    finally:
        s.waiting.clear()
    assert snap["num_waiting_reqs"] == 2 and snap["queues"]["waiting"] == 2
    assert snap["num_waiting_uncached_tokens"] == (100 - 64) + 30
    assert snap["num_total_tokens"] == snap["num_used_tokens"] + 100 + 30 == snap["num_active_tokens"]


LOAD = {
    **{k: 0 for k in CORE},
    "decode_moments": None,
    "memory": {"weight_gb": 0.0},
    "disaggregation": {"mode": "x"},
    "queues": {"waiting": 3},
}


@pytest.mark.parametrize(
    "include, sections",
    [
        (None, ["memory", "disaggregation", "queues"]),
        ({"all"}, ["memory", "disaggregation", "queues"]),
        ({"core"}, []),
        ({"core", "disagg", "queues", "memory"}, ["memory", "disaggregation", "queues"]),  # smg's
        ({"disagg"}, ["disaggregation"]),
        ({"spec", "lora"}, []),
    ],
)
def test_to_dict_keeps_the_core_and_the_sections_asked_for(include, sections):
    d = loads.to_dict(LOAD, include)
    assert list(d) == CORE + sections


def test_an_unknown_section_is_an_error():
    with pytest.raises(ValueError, match="Invalid include sections"):
        loads.to_dict(LOAD, {"core", "bogus"})


def test_answer_and_prometheus_layout():
    body = loads.answer([LOAD], {"core"})
    assert list(body) == ["timestamp", "version", "accelerator", "num_accelerators", "loads"]
    assert body["version"] == __version__ and body["accelerator"] is None and body["num_accelerators"] == 1
    assert loads.answer([], None)["loads"] == []
    text = loads.prometheus([{**LOAD, "dp_rank": 0, "num_running_reqs": 2}], None)
    assert '# TYPE sglang_num_running_reqs gauge\nsglang_num_running_reqs{dp_rank="0"} 2\n' in text
    assert 'sglang_queues_waiting{dp_rank="0"} 3' in text and "sglang_disagg_" not in text  # mode is no number
    assert "decode_moments" not in text and "dp_rank gauge" not in text


@pytest.mark.parametrize("body, temperature", [({}, 1.0), ({"temperature": 0}, 0.0), ({"temperature": 0.7}, 0.7)])
def test_temperature_defaults_to_sglangs_1(body, temperature):
    assert rp.sampling_kwargs(body)["temperature"] == temperature
    assert rp.sampling_kwargs(body)["top_p"] == 1.0
