"""Endpoint behaviour an operator relies on, on real processes: /flush_cache refuses while requests run, the
upstream leak check (abort_all brings num_running_reqs back to 0), /v1/completions, /metrics only with
--enable-metrics, and /v1/loads as SGLang 0.5.23 serves it (what smg polls), with /loads and /version absent as
there."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import httpx
import pytest

from engine import __version__
from tests.engine.stack import ROOT, metric, wait_for
from tests.fixtures.net import free_port
from tests.unit.test_engine_loads import CORE as CORE_KEYS

pytestmark = pytest.mark.engine

PROMPT = "the quick brown fox " * 20


def _long_generation(url: str, out: dict, max_new_tokens: int = 3000) -> threading.Thread:
    def go():
        try:
            out["r"] = httpx.post(
                f"{url}/generate",
                timeout=120,
                json={"text": PROMPT, "sampling_params": {"max_new_tokens": max_new_tokens, "ignore_eos": True}},
            )
        except Exception as e:  # noqa: BLE001
            out["r"] = e

    th = threading.Thread(target=go)
    th.start()
    return th


def test_flush_cache_refuses_while_requests_run_and_abort_all_drains(stack):
    out: dict = {}
    th = _long_generation(stack.router, out)
    wait_for(lambda: metric(stack.decode, "sglang:num_running_reqs") >= 1, 30, "decode running the request", 0.05)
    busy = httpx.post(f"{stack.decode}/flush_cache", timeout=5)
    assert busy.status_code == 400
    assert httpx.post(f"{stack.decode}/abort_request", json={"abort_all": True}, timeout=5).status_code == 200
    th.join(60)
    assert not th.is_alive(), "client hung after abort_all"
    # SGLang's leak check: after abort_all, num_running_reqs returns to 0
    wait_for(lambda: metric(stack.decode, "sglang:num_running_reqs") == 0, 10, "running to drain")
    # as SGLang: an /abort_request'd generation answers 200 with finish_reason abort (so the router does not retry)
    assert out["r"].status_code == 200, out["r"].text
    assert out["r"].json()["meta_info"]["finish_reason"]["type"] == "abort"
    assert len(out["r"].json()["text"]) < 3000
    assert httpx.post(f"{stack.decode}/flush_cache", timeout=5).status_code == 200


def test_completions_endpoint_with_usage(stack):
    r = httpx.post(
        f"{stack.router}/v1/completions",
        timeout=60,
        json={"model": "tiny", "prompt": "hello", "max_tokens": 5, "temperature": 0},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["choices"][0]["text"]
    assert body["usage"]["completion_tokens"] == 5 and body["usage"]["prompt_tokens"] > 0


def test_metrics_only_with_enable_metrics(tmp_path):
    port = free_port()
    log = open(tmp_path / "worker.log", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine.launch_server",
            "--disaggregation-mode",
            "null",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, (tmp_path / "worker.log").read_text()
            assert time.monotonic() < deadline, "worker not healthy in 60 s"
            time.sleep(0.1)
        assert httpx.get(f"{url}/metrics", timeout=5).status_code == 404
    finally:
        proc.kill()
        proc.wait(10)


SMG_POLL = "/v1/loads?include=core,disagg,queues,memory"
CORE = set(CORE_KEYS)  # SGLang 0.5.23's core section of a load, in its order there


def _loads(url: str, query: str = SMG_POLL) -> dict:
    r = httpx.get(f"{url}{query}", timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def test_v1_loads_in_sglangs_shape_on_both_workers(stack):
    for url, mode in ((stack.prefill, "prefill"), (stack.decode, "decode")):
        body = _loads(url)
        assert set(body) == {"timestamp", "version", "accelerator", "num_accelerators", "loads"}
        assert body["version"] == __version__ == httpx.get(f"{url}/server_info", timeout=5).json()["version"]
        assert body["accelerator"] is None and body["num_accelerators"] == 1
        (load,) = body["loads"]
        assert set(load) == CORE | {"memory", "disaggregation", "queues"}
        assert load["dp_rank"] == 0 and load["max_running_requests"] == 64
        assert load["max_total_num_tokens"] == 131072 == load["memory"]["token_capacity"]
        assert load["utilization"] == (-1 if mode == "prefill" else 0.0)
        assert load["disaggregation"]["mode"] == mode
        assert set(load["queues"]) == {"waiting", "grammar", "paused", "retracted", "prealloc_ready"}
        assert set(_loads(url, "/v1/loads?include=core")["loads"][0]) == CORE
        assert set(_loads(url, "/v1/loads")["loads"][0]) == CORE | {"memory", "disaggregation", "queues"}


def test_v1_loads_reports_the_work_in_flight(stack):
    """A room held in the prefill's inflight queue by the drill (its KV in staging pages), then the same request
    running on the decode."""
    out: dict = {}
    th = _long_generation(stack.router, out)
    try:
        p = wait_for(
            lambda: (lambda x: x if x["disaggregation"]["prefill_inflight_queue_reqs"] >= 1 else None)(
                _loads(stack.prefill)["loads"][0]
            ),
            20,
            "the prefill to report its room in the inflight queue",
            0.01,
        )
        assert p["num_used_tokens"] > 0 and 0 < p["token_usage"] <= 1
        assert p["num_total_tokens"] >= p["num_used_tokens"]
        d = wait_for(
            lambda: (lambda x: x if x["num_running_reqs"] >= 1 else None)(_loads(stack.decode)["loads"][0]),
            30,
            "the decode to report a running request",
            0.05,
        )
        assert d["num_waiting_uncached_tokens"] == 0  # a decode computes no prompt
        moments = d["decode_moments"]
        wait_for(lambda: _loads(stack.decode)["loads"][0]["decode_moments"][0] > moments[0], 10, "decode steps")
        wait_for(lambda: _loads(stack.decode)["loads"][0]["gen_throughput"] > 0, 10, "decode throughput")
    finally:
        httpx.post(f"{stack.decode}/abort_request", json={"abort_all": True}, timeout=5)
        th.join(60)
    p = _loads(stack.prefill)["loads"][0]
    assert p["total_prefill_uncached_tokens"] > 0 and p["total_prefill_busy_us"] > 0
    assert p["disaggregation"]["kv_transfer_latency_ms"] > 0 and p["disaggregation"]["kv_transfer_speed_gb_s"] > 0
    wait_for(lambda: _loads(stack.decode)["loads"][0]["num_running_reqs"] == 0, 10, "the decode to drain")


def test_v1_loads_edges_and_its_duration_histogram(stack):
    before = metric(stack.decode, "sglang:get_loads_duration_seconds_count")
    before = 0.0 if before != before else before
    assert _loads(stack.decode, "/v1/loads?dp_rank=0")["loads"]
    assert _loads(stack.decode, "/v1/loads?dp_rank=1")["loads"] == []  # no such DP rank
    r = httpx.get(f"{stack.decode}/v1/loads?dp_rank=x", timeout=5)
    assert r.status_code == 400 and r.json()["code"] == 400
    # SGLang 0.5.23 validates include only when it renders the loads, outside its error handling: a 500
    assert httpx.get(f"{stack.decode}/v1/loads?include=core,bogus", timeout=5).status_code == 500
    text = httpx.get(f"{stack.decode}/v1/loads?format=prometheus&include=core,disagg", timeout=5).text
    assert '# TYPE sglang_num_running_reqs gauge\nsglang_num_running_reqs{dp_rank="0"} ' in text
    assert 'sglang_disagg_decode_transfer_queue_reqs{dp_rank="0"} 0' in text and "sglang_queues_" not in text
    # every call that reached the handler is timed (the dp_rank=x one was refused before it)
    assert metric(stack.decode, "sglang:get_loads_duration_seconds_count") >= before + 4


def test_loads_and_version_are_not_routes_of_sglang_0_5_23(stack):
    """smg 1.13 asks /loads (an smg gateway's route) before /v1/loads, and /version: SGLang 0.5.23 answers both 404
    (its live capture counts /loads 404 and /v1/loads 200), and the engine does the same."""
    for url in (stack.prefill, stack.decode):
        for path in ("/loads", "/version"):
            assert httpx.get(f"{url}{path}", timeout=5).status_code == 404, path
