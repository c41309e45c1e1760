"""The engine's /metrics against SGLang 0.5.23's (the captures in tests/unit/fixtures): the live captures of a real
PD pair on a CPU (sglang-0.5.23-cpu-pd-*-metrics.prom) are the fidelity target; the older collector captures
(*-idle.prom) give the name, type, help, labels and buckets of the families no live run fed (they are wrong about
what exists at rest: SGLang's multiprocess metrics show a series only once fed). Every family the engine exposes has
SGLang's name, type, help, label names and values, and buckets; nothing else is exposed; at rest there is no failure
or abort counter at all; under a little load (through the real router, real NIXL) every family moves or holds its
configured value; promtool finds no kind of problem the real captures do not also have."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time

import httpx
import pytest

from engine.metric_families import STAGES
from engine.model import TinyLM
from pdctl.checks.metrics import parse_metrics
from tests.engine.stack import Stack, metric, wait_for

pytestmark = pytest.mark.engine

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "unit", "fixtures")
BASE = ("engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank")
TOK = ("engine_type", "model_name")
LONG = "the quick brown fox " * 60  # ~1200 tokens: 3 prefill chunks

# Families without series in the idle captures: their label names, label values and buckets as SGLang 0.5.23's
# metrics collector declares them (python/sglang/srt/observability/metrics_collector.py).
TTFT = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.035,
    0.04,
    0.06,
    0.08,
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1,
    2,
    4,
    6,
    8,
)
SOURCE = {  # name: (label names, {extra label: allowed values}, buckets or None)
    "sglang:per_stage_req_latency_seconds": (
        BASE + ("stage",),
        {"stage": set(sum(STAGES.values(), ()))},
        tuple(0.001 * 1.62**i for i in range(30)),
    ),
    "sglang:realtime_tokens_total": (BASE + ("mode",), {"mode": {"prefill_compute", "prefill_cache", "decode"}}, None),
    "sglang:forward_execution_seconds_total": (BASE + ("category",), {"category": {"extend", "decode"}}, None),
    "sglang:startup_time_seconds": (
        TOK + ("phase",),
        {"phase": {"load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e"}},
        None,
    ),
    "sglang:prompt_tokens_total": (TOK + ("is_streaming",), {"is_streaming": {"true", "false"}}, None),
    "sglang:generation_tokens_total": (TOK + ("is_streaming",), {"is_streaming": {"true", "false"}}, None),
    "sglang:num_requests_total": (TOK + ("is_streaming",), {"is_streaming": {"true", "false"}}, None),
    "sglang:time_to_first_token_seconds": (TOK + ("is_streaming",), {"is_streaming": {"true", "false"}}, TTFT),
    "sglang:request_time_per_output_token_seconds": (TOK + ("is_streaming",), {"is_streaming": {"true", "false"}}, ITL),
    "sglang:e2e_request_latency_seconds": (
        TOK + ("is_streaming",),
        {"is_streaming": {"true", "false"}},
        TTFT + (600, 1200, 1800, 2400),
    ),
}
# Counters that move only on a failure this test does not cause (a prefill that never answers the bootstrap): as in
# SGLang, they have no series, and no HELP/TYPE lines, until their first increment.
FAILURE_ONLY = {"sglang:num_bootstrap_failed_reqs_total"}
# Never observed on a prefill worker, in SGLang 0.5.23 as here: never shown there.
PREFILL_UNOBSERVED = {"sglang:time_to_first_token_seconds", "sglang:request_time_per_output_token_seconds"}
# Counters and histograms that appear at their first increment or observation: none of them before any request.
# (The warm-up generation, counted as SGLang counts its own, runs locally in one output batch: requests, tokens,
# e2e and, on the decode, TTFT exist at rest; no transfer, no inter-token latency, no TPOT.)
NOT_AT_REST = {
    "sglang:num_transfer_failed_reqs_total",
    "sglang:num_bootstrap_failed_reqs_total",
    "sglang:num_aborted_requests_total",
    "sglang:inter_token_latency_seconds",
    "sglang:request_time_per_output_token_seconds",
    "sglang:kv_transfer_latency_ms",
    "sglang:kv_transfer_total_mb",
    "sglang:kv_transfer_speed_gb_s",
    "sglang:forward_execution_seconds_total",
}
# The families the live capture of that mode does not show, and why: its run had no failure, no abort, only
# non-streaming requests answered in one output batch (no inter-token latency; on the decode no TPOT), no device
# timer (forward execution time is off by default).
NOT_IN_LIVE_RUN = {
    "sglang:num_transfer_failed_reqs_total",
    "sglang:num_aborted_requests_total",
    "sglang:inter_token_latency_seconds",
    "sglang:request_time_per_output_token_seconds",
}
# Gauges that hold a value of the configuration, and gauges that rise while a request is in the stage they count.
CONFIG = {
    "sglang:page_size",
    "sglang:num_pages",
    "sglang:max_total_num_tokens",
    "sglang:context_len",
    "sglang:kv_cache_memory_usage_gb",
    "sglang:weight_memory_usage_gb",
    "sglang:kv_available_tokens",
}
TRANSIENT = {
    "prefill": {
        "sglang:num_prefill_bootstrap_queue_reqs",
        "sglang:num_prefill_inflight_queue_reqs",
        "sglang:token_usage",
        "sglang:full_token_usage",
        "sglang:num_used_tokens",
        "sglang:kv_used_tokens",
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
    },
    "decode": {
        "sglang:num_running_reqs",
        "sglang:decode_sum_seq_lens",
        "sglang:gen_throughput",
        "sglang:num_decode_transfer_queue_reqs",
        "sglang:prealloc_full_token_usage",
        "sglang:token_usage",
        "sglang:full_token_usage",
        "sglang:num_used_tokens",
        "sglang:kv_used_tokens",
        "sglang:num_decode_prealloc_queue_reqs",
        "sglang:num_queue_reqs",
    },
}
# Of those, the ones a light load may leave at 0 on a given run: a prefill computes ~1k tokens in a few ms and
# runs no decode batch, and a room leaves its bootstrap queue as soon as the decode's destination arrives (a few
# ms once the peers know each other); a decode's prealloc step takes one loop turn; pending prealloc needs a full
# KV pool. Their stages still show in per_stage_req_latency_seconds.
MAY_STAY_ZERO = {
    "prefill": {"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:num_prefill_bootstrap_queue_reqs"},
    "decode": {"sglang:num_decode_prealloc_queue_reqs", "sglang:num_queue_reqs", "sglang:pending_prealloc_token_usage"},
}


def fams(text: str) -> dict:
    return {n: f for n, f in parse_metrics(text)._families.items() if not n.startswith(("python_", "process_"))}


def capture(mode: str, live: bool = False) -> dict:
    name = f"sglang-0.5.23-cpu-pd-{mode}-metrics.prom" if live else f"sglang-0.5.23-metrics-{mode}-idle.prom"
    with open(os.path.join(FIXTURES, name)) as fh:
        return fams(fh.read())


def buckets(fam) -> tuple[float, ...]:
    les = []
    for s in fam.samples:
        if s.name.endswith("_bucket") and s.labels["le"] != "+Inf" and float(s.labels["le"]) not in les:
            les.append(float(s.labels["le"]))
    return tuple(les)


def amount(fam) -> float:
    """What a counter or histogram has counted: the sum of its _total or _count samples."""
    return sum(s.value for s in fam.samples if s.name.endswith(("_total", "_count")))


def scrape(url: str) -> dict:
    return fams(httpx.get(f"{url}/metrics", timeout=5).text)


@pytest.fixture(scope="module")
def load():
    """A stack (the transfer-delay drill holds each room ~250 ms in the inflight queue, so the PD gauges can be
    seen); the metrics before, the maxima of the gauges sampled during, and the metrics after a little load."""
    with Stack(drills="transfer-delay-ms=250").running() as s:
        urls = {"prefill": s.prefill, "decode": s.decode}
        before = {m: scrape(u) for m, u in urls.items()}
        peak = {m: {} for m in urls}
        stop = threading.Event()

        def sampler():  # cheap (no full parse): the main thread must also catch a room in its inflight window
            while not stop.is_set():
                for m, u in urls.items():
                    try:
                        text = httpx.get(f"{u}/metrics", timeout=5).text
                    except httpx.HTTPError:
                        continue
                    for line in text.splitlines():
                        name = line.split("{", 1)[0]
                        if name in TRANSIENT[m]:
                            peak[m][name] = max(peak[m].get(name, 0.0), float(line.rsplit(" ", 1)[1]))
                time.sleep(0.02)

        t = threading.Thread(target=sampler, daemon=True)
        t.start()
        try:
            _drive(s)
        finally:
            stop.set()
            t.join(10)
        after = {m: scrape(u) for m, u in urls.items()}
        texts = {m: httpx.get(f"{u}/metrics", timeout=5).text for m, u in urls.items()}
        info = httpx.get(f"{s.decode}/server_info", timeout=5).json()
        yield before, peak, after, texts, info


def _drive(s: Stack) -> None:
    """A plain chat, a streamed chat, a chunked /generate, one request aborted on the decode while it decodes and
    one aborted on the prefill while its room waits in the inflight queue; and smg's load poll on both workers."""
    for url in (s.prefill, s.decode):
        assert httpx.get(f"{url}/v1/loads?include=core,disagg,queues,memory", timeout=10).status_code == 200
    r = httpx.post(
        f"{s.router}/v1/chat/completions",
        timeout=60,
        json={"model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8},
    )
    assert r.status_code == 200, r.text
    with httpx.stream(
        "POST",
        f"{s.router}/v1/chat/completions",
        timeout=60,
        json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "stream": True},
    ) as st:
        assert st.status_code == 200
        assert "[DONE]" in "".join(st.iter_text())
    r = httpx.post(f"{s.router}/generate", timeout=60, json={"text": LONG, "sampling_params": {"max_new_tokens": 4}})
    assert r.status_code == 200, r.text
    # a long prompt on the prefill: each of its 3 chunks waits out the drill, so its room sits ~750 ms inflight
    for where, when, text in (
        (s.decode, "sglang:num_running_reqs", "abort me"),
        (s.prefill, "sglang:num_prefill_inflight_queue_reqs", LONG),
    ):
        done = {}
        th = threading.Thread(
            target=lambda: done.setdefault(
                "r",
                httpx.post(
                    f"{s.router}/generate", timeout=60, json={"text": text, "sampling_params": {"max_new_tokens": 400}}
                ),
            )
        )
        th.start()
        wait_for(lambda: metric(where, when) >= 1, 20, f"{when} >= 1", interval=0.01)
        # the only request in the stack: abort_all aborts it (the router does not forward a client's rid)
        assert httpx.post(f"{where}/abort_request", json={"abort_all": True}, timeout=5).status_code == 200
        th.join(30)
        assert "r" in done


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_at_rest_no_failure_or_abort_counter_and_no_created(load, mode):
    before, _, _, _, _ = load
    assert not NOT_AT_REST & set(before[mode]), sorted(NOT_AT_REST & set(before[mode]))
    assert not [n for n in before[mode] if n.endswith("_created")]
    assert all(f.samples for f in before[mode].values())  # a family without series is not shown at all


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_families_are_sglangs(load, mode):
    _, _, after, texts, _ = load
    ours, live, theirs = after[mode], capture(mode, live=True), capture(mode)
    extra = sorted(set(ours) - set(live) - NOT_IN_LIVE_RUN)
    assert not extra, f"{mode} exposes families the live SGLang 0.5.23 {mode} did not: {extra}"
    assert "_created" not in texts[mode]
    assert not FAILURE_ONLY & set(ours), "a failure counter without a failure"
    if mode == "prefill":
        assert not PREFILL_UNOBSERVED & set(ours)
    assert len(ours) >= 30, sorted(ours)
    for name, f in ours.items():
        ref = live.get(name) or theirs[name]
        assert (f.type, f.help) == (ref.type, ref.help), name
        assert f.samples, f"{name} is shown without series on the {mode}"
        if name in SOURCE:
            labels, values, bk = SOURCE[name]
            for k, allowed in values.items():
                assert {s.labels[k] for s in f.samples} <= allowed, (name, k)
        else:
            labels, bk = ref.label_names, (buckets(ref) if ref.type == "histogram" else None)
        assert tuple(sorted(set(f.label_names) - {"le"})) == tuple(sorted(set(labels) - {"le"})), name
        if f.type == "histogram":
            assert buckets(f) == pytest.approx(bk), name
        for s in f.samples:
            assert s.labels["engine_type"] == mode and s.labels["model_name"] == "tiny", s.series()
            assert all(s.labels[k] == "0" for k in ("tp_rank", "pp_rank", "moe_ep_rank") if k in s.labels), s
    if mode == "prefill":
        assert {s.labels["stage"] for s in ours["sglang:per_stage_req_latency_seconds"].samples} == set(STAGES[mode])


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_every_family_moves_under_load(load, mode):
    before, peak, after, _, _ = load
    still = []
    for name, f in after[mode].items():
        if f.type in ("counter", "histogram"):
            prev = amount(before[mode][name]) if name in before[mode] else 0.0
            if not amount(f) > prev:
                still.append(name)
        elif f.type == "gauge" and name not in CONFIG and not name.startswith("sglang:startup"):
            if name in TRANSIENT[mode] - MAY_STAY_ZERO[mode] and not peak[mode].get(name, 0) > 0:
                still.append(name)
    assert not still, f"{mode}: these families did not move under load: {still}"

    def delta(name):
        return amount(after[mode][name]) - (amount(before[mode][name]) if name in before[mode] else 0.0)

    # one abort on each side, counted once; every request counted once when it ends, whatever the path
    assert delta("sglang:num_aborted_requests_total") == 1
    assert delta("sglang:num_requests_total") in (5, 6)  # 6 when the router retried the aborted room
    assert delta("sglang:num_requests_total") == delta("sglang:e2e_request_latency_seconds")
    assert delta("sglang:prompt_tokens_total") == _sum(after[mode], before[mode], "sglang:prompt_tokens_histogram")
    # the PD queues are empty again, the decode pool is back to its whole capacity
    assert _value(after[mode], "sglang:num_running_reqs") == 0


def _sum(after: dict, before: dict, hist: str) -> float:
    def total(f):
        return sum(x.value for x in f.samples if x.name.endswith("_sum")) if f else 0.0

    return total(after.get(hist)) - total(before.get(hist))


def _value(fams_: dict, name: str) -> float:
    return sum(s.value for s in fams_[name].samples)


def test_configuration_gauges(load):
    _, _, after, _, info = load
    cfg = TinyLM().cfg
    for mode in ("prefill", "decode"):
        m = after[mode]
        assert _value(m, "sglang:page_size") == 64
        assert _value(m, "sglang:max_total_num_tokens") == 131072
        assert _value(m, "sglang:num_pages") == 131072 // 64
        assert _value(m, "sglang:context_len") == info["context_length"]
        kv = (131072 // 64 + 1) * cfg.n_layers * 2 * 64 * cfg.kv_dim * 4
        assert _value(m, "sglang:kv_cache_memory_usage_gb") == pytest.approx(kv / 2**30)
        weights = sum(t.numel() * t.element_size() for t in TinyLM().p.values())
        assert _value(m, "sglang:weight_memory_usage_gb") == pytest.approx(weights / 2**30)
        phases = {s.labels["phase"]: s.value for s in m["sglang:startup_time_seconds"].samples}
        assert set(phases) == {"load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e"}
        assert all(v > 0 for v in phases.values()) and phases["scheduler_e2e"] >= phases["load_weight"]
    # every request that reached the prefill has a TTFT on the decode side only, as in SGLang 0.5.23
    assert "sglang:time_to_first_token_seconds" not in after["prefill"]
    assert amount(after["decode"]["sglang:time_to_first_token_seconds"]) >= 5


def _promtool_kinds(text: str) -> set[str]:
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    lines = (p.stdout + p.stderr).splitlines()
    return {line.split(" ", 1)[1] for line in lines if " " in line}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian's prometheus package) not installed")
@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_promtool_finds_nothing_sglang_does_not_have(load, mode):
    _, _, _, texts, _ = load
    theirs = set()
    for name in (f"sglang-0.5.23-metrics-{mode}-idle.prom", f"sglang-0.5.23-cpu-pd-{mode}-metrics.prom"):
        with open(os.path.join(FIXTURES, name)) as fh:
            theirs |= _promtool_kinds(fh.read())
    ours = _promtool_kinds(texts[mode])
    assert "metric names should not contain ':'" in ours  # promtool ran and read the text
    assert ours <= theirs, sorted(ours - theirs)
