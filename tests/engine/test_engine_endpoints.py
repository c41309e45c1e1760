"""Endpoint behaviour an operator relies on, on real processes: /flush_cache refuses while requests run, the
upstream leak check (abort_all brings num_running_reqs back to 0), /v1/completions, and /metrics only with
--enable-metrics."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import httpx
import pytest

from tests.engine.stack import ROOT, metric, wait_for
from tests.fixtures.net import free_port

pytestmark = pytest.mark.engine

PROMPT = "the quick brown fox " * 20


def _long_generation(url: str, out: dict, max_new_tokens: int = 3000) -> threading.Thread:
    def go():
        try:
            out["r"] = httpx.post(f"{url}/generate", timeout=120,
                                  json={"text": PROMPT, "sampling_params": {"max_new_tokens": max_new_tokens,
                                                                            "ignore_eos": True}})
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
    r = httpx.post(f"{stack.router}/v1/completions", timeout=60,
                   json={"model": "tiny", "prompt": "hello", "max_tokens": 5})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["choices"][0]["text"]
    assert body["usage"]["completion_tokens"] == 5 and body["usage"]["prompt_tokens"] > 0


def test_metrics_only_with_enable_metrics(tmp_path):
    port = free_port()
    log = open(tmp_path / "worker.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "engine.launch_server", "--disaggregation-mode", "null",
                             "--host", "127.0.0.1", "--port", str(port)], cwd=ROOT, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
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
