"""Real prefill + decode + sglang-router on loopback, real NIXL transfers."""

from __future__ import annotations

import concurrent.futures as cf
import json
import threading
import time
import uuid

import httpx
import pytest

from engine.model import TinyLM
from engine.tokenizer import ByteTokenizer
from tests.engine.stack import Stack, counter, metric, wait_for

pytestmark = pytest.mark.engine

INFLIGHT = "sglang:num_prefill_inflight_queue_reqs"
FAILED = "sglang:num_transfer_failed_reqs_total"
LONG = "the quick brown fox " * 100  # ~2000 tokens: 4 chunks of 512


def reference(messages, n):
    tok = ByteTokenizer()
    return tok.decode(TinyLM().generate_greedy(tok.encode(tok.apply_chat_template(messages)), n))


def chat(url, content, max_tokens=16, timeout=60, **kw):
    """Greedy unless told otherwise: the tests compare with the greedy reference (SGLang samples at 1.0 by default)."""
    return httpx.post(
        f"{url}/v1/chat/completions",
        timeout=timeout,
        json={
            "model": "tiny",
            "messages": [{"role": "user", "content": content}],
            "max_tokens": max_tokens,
            "temperature": 0,
            **kw,
        },
    )


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
    r = httpx.post(
        f"{stack.router}/generate",
        timeout=60,
        json={"text": LONG, "sampling_params": {"max_new_tokens": 8, "temperature": 0}},
    )
    assert r.status_code == 200, r.text
    tok = ByteTokenizer()
    assert r.json()["text"] == tok.decode(TinyLM().generate_greedy(tok.encode(LONG), 8))


def test_streaming_chat(stack):
    with httpx.stream(
        "POST",
        f"{stack.router}/v1/chat/completions",
        timeout=60,
        json={
            "model": "tiny",
            "messages": [{"role": "user", "content": "stream"}],
            "max_tokens": 8,
            "temperature": 0,
            "stream": True,
        },
    ) as r:
        assert r.status_code == 200
        lines = [ln for ln in r.iter_lines() if ln.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    text = "".join(json.loads(ln[6:])["choices"][0]["delta"].get("content", "") for ln in lines[:-1])
    assert text == reference([{"role": "user", "content": "stream"}], 8)


def _chat_stream(url, **body) -> tuple[list[dict], list[str]]:
    """(the JSON chunks, the raw data lines) of a streamed chat."""
    with httpx.stream(
        "POST",
        f"{url}/v1/chat/completions",
        timeout=60,
        json={"model": "tiny", "stream": True, "temperature": 0, **body},
    ) as r:
        assert r.status_code == 200
        lines = [ln for ln in r.iter_lines() if ln.startswith("data: ")]
    return [json.loads(ln[6:]) for ln in lines if ln != "data: [DONE]"], lines


def test_streaming_chat_chunks_come_in_sglangs_sequence(stack):
    """SGLang 0.5.23 (serving_chat.py): a first chunk with only the role, content chunks, a separate chunk with only
    the finish_reason, the usage chunk, [DONE]; every choice field present, the delta's reasoning_content null."""
    msgs = [{"role": "user", "content": "in order"}]
    chunks, lines = _chat_stream(stack.router, messages=msgs, max_tokens=6, stream_options={"include_usage": True})
    assert lines[-1] == "data: [DONE]"
    first, *content, finish, usage = chunks
    assert first["object"] == "chat.completion.chunk" and "usage" not in first
    assert first["choices"] == [
        {
            "index": 0,
            "delta": {"reasoning_content": None, "role": "assistant", "content": ""},
            "logprobs": None,
            "finish_reason": None,
            "matched_stop": None,
        }
    ]
    assert content, chunks
    for c in content:
        (ch,) = c["choices"]
        assert set(ch["delta"]) == {"reasoning_content", "content"} and ch["delta"]["content"]
        assert ch["finish_reason"] is None and ch["matched_stop"] is None
    assert "".join(c["choices"][0]["delta"]["content"] for c in content) == reference(msgs, 6)
    assert finish["choices"] == [
        {
            "index": 0,
            "delta": {"reasoning_content": None},
            "logprobs": None,
            "finish_reason": "length",
            "matched_stop": None,
        }
    ]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 6
    assert len({c["id"] for c in chunks}) == 1


def test_streaming_chat_with_n_ends_every_choice_after_all_content(stack):
    chunks, _ = _chat_stream(stack.router, messages=[{"role": "user", "content": "two"}], max_tokens=4, n=2)
    choices = [c["choices"][0] for c in chunks]
    ends = [i for i, ch in enumerate(choices) if ch["finish_reason"] is not None]
    assert len(ends) == 2 and ends == [len(choices) - 2, len(choices) - 1]  # both after every content chunk
    assert sorted(choices[i]["index"] for i in ends) == [0, 1]
    for k in (0, 1):
        mine = [ch for ch in choices if ch["index"] == k]
        assert mine[0]["delta"] == {"reasoning_content": None, "role": "assistant", "content": ""}
        assert sum("role" in ch["delta"] for ch in mine) == 1
        assert "".join(ch["delta"].get("content") or "" for ch in mine) == reference(
            [{"role": "user", "content": "two"}], 4
        )


def test_no_temperature_samples_at_sglangs_default(stack):
    """SGLang samples at temperature 1.0 when a request names none: the same seed gives what an explicit 1.0 gives
    (and differs from greedy), and several unseeded choices are not all the greedy answer."""
    msgs = [{"role": "user", "content": "sample me"}]
    body = {"model": "tiny", "messages": msgs, "max_tokens": 12, "seed": 11}
    default = httpx.post(f"{stack.router}/v1/chat/completions", timeout=60, json=body)
    explicit = httpx.post(f"{stack.router}/v1/chat/completions", timeout=60, json={**body, "temperature": 1.0})
    assert default.status_code == explicit.status_code == 200, (default.text, explicit.text)
    text = default.json()["choices"][0]["message"]["content"]
    assert text == explicit.json()["choices"][0]["message"]["content"]
    assert text != reference(msgs, 12)
    r = httpx.post(
        f"{stack.router}/generate",
        timeout=60,
        json={"text": "sample me", "sampling_params": {"max_new_tokens": 12, "n": 4}},
    )
    assert r.status_code == 200, r.text
    tok = ByteTokenizer()
    assert {x["text"] for x in r.json()} != {tok.decode(TinyLM().generate_greedy(tok.encode("sample me"), 12))}


def test_sixteen_concurrent_requests_complete(stack):
    with cf.ThreadPoolExecutor(16) as ex:
        futs = [ex.submit(chat, stack.router, f"request {i}", 8) for i in range(16)]
        res = [f.result() for f in futs]
    assert all(r.status_code == 200 for r in res), [r.text for r in res if r.status_code != 200]
    for i, r in enumerate(res):
        assert r.json()["choices"][0]["message"]["content"] == reference(
            [{"role": "user", "content": f"request {i}"}], 8
        )


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[1,2]",
        b'{"messages": "hi"}',
        b'{"messages": []}',
        b'{"messages": [{"role":"user","content":"x"}], "max_tokens": -1}',
        b'{"messages": [{"role":"user","content":"x"}], "temperature": "hot"}',
    ],
)
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
            out["r"] = httpx.post(
                f"{s.router}/generate",
                timeout=60,
                json={"text": LONG, "rid": rid, "sampling_params": {"max_new_tokens": 4}},
            )
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
    before = counter(stack.prefill, FAILED)
    r, _ = _abort_in_transfer_window(stack)
    # The caller got an answer, not a hang. (Decode answers 500 "KV transfer failed", which sglang-router may
    # retry as a new request: whatever the final status, the aborted room itself must drain, below.)
    assert not isinstance(r, Exception), r
    wait_for(lambda: metric(stack.prefill, INFLIGHT) == 0, 10, "inflight to drain")
    assert counter(stack.prefill, FAILED) >= before + 1
    assert metric(stack.prefill, "sglang:num_aborted_requests_total") >= 1
    # and the pair still serves
    assert chat(stack.router, "after abort", 4).status_code == 200


def test_status_update_race_drill_pins_inflight():
    s = Stack(
        drills="status-update-race,transfer-delay-ms=300", prefill_env={"SGLANG_DISAGGREGATION_INFLIGHT_TIMEOUT": "1"}
    )
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
    s = Stack(
        drills="transfer-delay-ms=400",
        prefill_env={"SGLANG_DISAGGREGATION_INFLIGHT_TIMEOUT": "4", "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "4"},
    )
    try:
        s.start()
        results = []

        def client(i):
            t = time.monotonic()
            try:
                r = httpx.post(
                    f"{s.router}/generate",
                    timeout=60,
                    json={"text": LONG + str(i), "sampling_params": {"max_new_tokens": 4}},
                )
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
        wait_for(
            lambda: (
                metric(s.prefill, INFLIGHT) == 0 and metric(s.prefill, "sglang:num_prefill_bootstrap_queue_reqs") == 0
            ),
            15,
            "prefill queues to drain after decode died",
        )
        assert counter(s.prefill, FAILED) + counter(s.prefill, "sglang:num_bootstrap_failed_reqs_total") >= 1
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
        before = counter(s.prefill, FAILED)
        t = time.monotonic()
        r = chat(s.router, "second decode", 4, timeout=30)
        assert r.status_code != 200 and time.monotonic() - t < 20
        wait_for(lambda: counter(s.prefill, FAILED) > before, 10, "prefill transfer_failed to grow")
        for url in (s.prefill, s.decode):
            assert httpx.get(f"{url}/health").status_code == 200
            assert httpx.get(f"{url}/health_generate", timeout=10).status_code == 200
    finally:
        s.stop()
