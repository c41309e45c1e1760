"""Real prefill + decode + sglang-router on loopback, real NIXL transfers."""
from __future__ import annotations

import concurrent.futures as cf
import threading
import time
import uuid

import httpx
import pytest

from engine.model import TinyLM
from engine.tokenizer import ByteTokenizer
from tests.engine.stack import Stack, metric, wait_for

pytestmark = pytest.mark.engine

INFLIGHT = "sglang:num_prefill_inflight_queue_reqs"
FAILED = "sglang:num_transfer_failed_reqs_total"
LONG = "the quick brown fox " * 100  # ~2000 tokens: 4 chunks of 512


def reference(messages, n):
    tok = ByteTokenizer()
    return tok.decode(TinyLM().generate_greedy(tok.encode(tok.apply_chat_template(messages)), n))


def chat(url, content, max_tokens=16, timeout=60, **kw):
    return httpx.post(f"{url}/v1/chat/completions", timeout=timeout,
                      json={"model": "tiny", "messages": [{"role": "user", "content": content}],
                            "max_tokens": max_tokens, **kw})


def test_chat_through_router_is_deterministic(stack):
    msgs = [{"role": "user", "content": "hello, engine"}]
    r = chat(stack.router, "hello, engine", 24)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["choices"][0]["message"]["content"] == reference(msgs, 24)
    assert body["usage"]["completion_tokens"] == 24
    assert body["usage"]["prompt_tokens"] == len(ByteTokenizer().apply_chat_template(msgs).encode())
    assert metric(stack.prefill, "sglang:kv_transfer_latency_ms_count") >= 1


def test_long_prompt_multi_chunk_matches_reference(stack):
    r = httpx.post(f"{stack.router}/generate", timeout=60,
                   json={"text": LONG, "sampling_params": {"max_new_tokens": 8}})
    assert r.status_code == 200, r.text
    tok = ByteTokenizer()
    assert r.json()["text"] == tok.decode(TinyLM().generate_greedy(tok.encode(LONG), 8))


def test_streaming_chat(stack):
    with httpx.stream("POST", f"{stack.router}/v1/chat/completions", timeout=60,
                      json={"model": "tiny", "messages": [{"role": "user", "content": "stream"}],
                            "max_tokens": 8, "stream": True}) as r:
        assert r.status_code == 200
        lines = [l for l in r.iter_lines() if l.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    text = "".join(__import__("json").loads(l[6:])["choices"][0]["delta"].get("content", "") for l in lines[:-1])
    assert text == reference([{"role": "user", "content": "stream"}], 8)


def test_sixteen_concurrent_requests_complete(stack):
    with cf.ThreadPoolExecutor(16) as ex:
        futs = [ex.submit(chat, stack.router, f"request {i}", 8) for i in range(16)]
        res = [f.result() for f in futs]
    assert all(r.status_code == 200 for r in res), [r.text for r in res if r.status_code != 200]
    for i, r in enumerate(res):
        assert r.json()["choices"][0]["message"]["content"] == reference([{"role": "user", "content": f"request {i}"}], 8)


@pytest.mark.parametrize("body", [b"{not json", b"[1,2]", b'{"messages": "hi"}', b'{"messages": []}',
                                  b'{"messages": [{"role":"user","content":"x"}], "max_tokens": -1}',
                                  b'{"messages": [{"role":"user","content":"x"}], "temperature": "hot"}'])
def test_malformed_requests_get_400(stack, body):
    for url in (stack.prefill, stack.decode):
        r = httpx.post(f"{url}/v1/chat/completions", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 400, (url, body, r.text)
        assert r.json()["message"]
    r = httpx.post(f"{stack.decode}/generate", json={"sampling_params": {}})
    assert r.status_code == 400
    assert httpx.get(f"{stack.prefill}/health").status_code == 200
    assert httpx.get(f"{stack.decode}/health_generate", timeout=10).status_code == 200


def test_info_endpoints(stack):
    info = httpx.get(f"{stack.prefill}/server_info").json()
    assert info["disaggregation_mode"] == "prefill" and info["drills"] == ["transfer-delay-ms=150"]
    assert "version" in info and "internal_states" in info
    import os
    assert os.path.isfile(os.path.join(info["model_path"], "tokenizer.json"))
    assert httpx.get(f"{stack.decode}/model_info").json()["is_generation"] is True
    assert httpx.get(f"{stack.prefill}/get_server_info").status_code == 200
    assert httpx.get(f"{stack.prefill}/health_generate", timeout=10).status_code == 200


def _abort_in_transfer_window(s: Stack) -> tuple[httpx.Response | Exception, float]:
    """Send a 4-chunk request through the router, abort it at prefill once it sits in the inflight queue."""
    rid = uuid.uuid4().hex
    out: dict = {}

    def client():
        t = time.monotonic()
        try:
            out["r"] = httpx.post(f"{s.router}/generate", timeout=60,
                                  json={"text": LONG, "rid": rid, "sampling_params": {"max_new_tokens": 4}})
        except Exception as e:  # noqa: BLE001
            out["r"] = e
        out["t"] = time.monotonic() - t

    th = threading.Thread(target=client)
    th.start()
    wait_for(lambda: metric(s.prefill, INFLIGHT) >= 1, 20, "request in prefill inflight queue", 0.02)
    httpx.post(f"{s.prefill}/abort_request", json={"rid": rid})
    th.join(60)
    assert not th.is_alive(), "client hung"
    return out["r"], out["t"]


def test_abort_in_transfer_window_drains(stack):
    before = metric(stack.prefill, FAILED)
    r, _ = _abort_in_transfer_window(stack)
    # The caller got an answer, not a hang. (Decode answers 500 "KV transfer failed", which sglang-router may
    # retry as a new request: whatever the final status, the aborted room itself must drain, below.)
    assert not isinstance(r, Exception), r
    wait_for(lambda: metric(stack.prefill, INFLIGHT) == 0, 10, "inflight to drain")
    assert metric(stack.prefill, FAILED) >= before + 1
    assert metric(stack.prefill, "sglang:num_aborted_requests_total") >= 1
    # and the pair still serves
    assert chat(stack.router, "after abort", 4).status_code == 200


def test_status_update_race_drill_pins_inflight():
    s = Stack(drills="status-update-race,transfer-delay-ms=300",
              prefill_env={"SGLANG_DISAGGREGATION_INFLIGHT_TIMEOUT": "1"})
    try:
        s.start()
        assert "status-update-race" in httpx.get(f"{s.prefill}/server_info").json()["drills"]
        _abort_in_transfer_window(s)
        time.sleep(3)  # well past the engine's inflight timeout, which the drill must not apply
        assert metric(s.prefill, INFLIGHT) >= 1, "room should stay pinned under the pre-fix status update"
        assert httpx.get(f"{s.prefill}/health").status_code == 200  # green while wedged, as in the seed
    finally:
        s.stop()


def test_kill9_decode_mid_transfer_fails_rooms_in_time():
    s = Stack(drills="transfer-delay-ms=400",
              prefill_env={"SGLANG_DISAGGREGATION_INFLIGHT_TIMEOUT": "4",
                           "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "4"})
    try:
        s.start()
        results = []

        def client(i):
            t = time.monotonic()
            try:
                r = httpx.post(f"{s.router}/generate", timeout=60,
                               json={"text": LONG + str(i), "sampling_params": {"max_new_tokens": 4}})
                results.append((r.status_code, time.monotonic() - t))
            except Exception as e:  # noqa: BLE001
                results.append((repr(e), time.monotonic() - t))

        ths = [threading.Thread(target=client, args=(i,)) for i in range(3)]
        for t in ths:
            t.start()
        wait_for(lambda: metric(s.prefill, INFLIGHT) >= 1, 20, "a room in the transfer window", 0.02)
        s.kill("decode")
        for t in ths:
            t.join(40)
        assert not any(t.is_alive() for t in ths), "a client hung"
        assert all(c != 200 for c, _ in results), results
        wait_for(lambda: metric(s.prefill, INFLIGHT) == 0 and metric(s.prefill, "sglang:num_prefill_bootstrap_queue_reqs") == 0,
                 15, "prefill queues to drain after decode died")
        assert metric(s.prefill, FAILED) + metric(s.prefill, "sglang:num_bootstrap_failed_reqs_total") >= 1
        assert httpx.get(f"{s.prefill}/health").status_code == 200
    finally:
        s.stop()


def test_degraded_bootstrap_drill_after_decode_only_restart():
    s = Stack(drills="degraded-bootstrap", decode_env={"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "3"})
    try:
        s.start()
        assert chat(s.router, "first decode", 4).status_code == 200
        s.kill("decode")
        s.start_decode()
        s.wait_healthy(s.decode)
        s.wait_ready()
        before = metric(s.prefill, FAILED)
        t = time.monotonic()
        r = chat(s.router, "second decode", 4, timeout=30)
        assert r.status_code != 200 and time.monotonic() - t < 20
        wait_for(lambda: metric(s.prefill, FAILED) > before, 10, "prefill transfer_failed to grow")
        for url in (s.prefill, s.decode):
            assert httpx.get(f"{url}/health").status_code == 200
            assert httpx.get(f"{url}/health_generate", timeout=10).status_code == 200
    finally:
        s.stop()
