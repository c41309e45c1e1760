"""health, e2e and fetch_metrics over real HTTP against a stdlib server on 127.0.0.1 (no mocks of the HTTP client)."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pdctl.checks import metric_names as N
from pdctl.checks.e2e import judge_completion_content, probe_chat
from pdctl.checks.health import judge_readiness, probe_health, probe_router_ready
from pdctl.checks.result import Status
from pdctl.checks.sampling import MetricsUnavailable, fetch_metrics
from pdctl.errors import UnreachableError

PROM = (Path(__file__).parent / "fixtures" / "sglang-0.5.23-metrics-prefill-idle.prom").read_text()


def chat_body(content, completion_tokens=8):
    return {
        "id": "x",
        "object": "chat.completion",
        "model": "deepseek-v4-flash",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": completion_tokens, "total_tokens": 9 + completion_tokens},
    }


class Stub(BaseHTTPRequestHandler):
    routes: dict = {}
    seen: list = []

    def log_message(self, *a):
        pass

    def _answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        Stub.seen.append((self.command, self.path, body))
        code, ctype, payload, delay = Stub.routes.get(self.path, (404, "text/plain", "not found", 0))
        if delay:
            time.sleep(delay)
        data = (
            payload
            if isinstance(payload, bytes)
            else (json.dumps(payload) if not isinstance(payload, str) else payload).encode()
        )
        try:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    do_GET = do_POST = _answer


@pytest.fixture(scope="module")
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    srv.daemon_threads = True
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def routes(server):
    Stub.routes = {
        "/health": (200, "text/plain", "", 0),
        "/metrics": (200, "text/plain; version=0.0.4", PROM, 0),
        "/v1/chat/completions": (200, "application/json", chat_body("Hello! How can I help you today?"), 0),
        "/readiness": (200, "application/json", {"status": "ready", "healthy_workers": 2, "total_workers": 2}, 0),
    }
    Stub.seen = []
    return Stub.routes


@pytest.fixture
def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


# -- health -----------------------------------------------------------------------------------------------------
def test_health_200_passes_with_latency(server, routes):
    r = probe_health(server, "/health", 4.0)
    assert r.status is Status.PASS and r.layer == "health" and r.name == "/health"
    assert r.data["status_code"] == 200 and r.data["latency_ms"] >= 0


def test_health_503_fails_naming_url(server, routes):
    routes["/health"] = (503, "text/plain", "starting", 0)
    r = probe_health(server, "/health", 4.0, target="prefill[0]")
    assert r.status is Status.FAIL and r.observed == "HTTP 503" and r.target == "prefill[0]"
    assert f"{server}/health" in r.detail and "starting" in r.detail


def test_health_refused_fails_naming_url_and_cause(closed_port):
    r = probe_health(closed_port, "/health", 2.0)
    assert r.status is Status.FAIL and r.observed == "connection refused"
    assert f"{closed_port}/health" in r.detail


def test_health_timeout_is_bounded(server, routes):
    routes["/health"] = (200, "text/plain", "", 3.0)
    t0 = time.monotonic()
    r = probe_health(server, "/health", 0.5)
    assert time.monotonic() - t0 < 2.5
    assert r.status is Status.FAIL and "0.5s" in r.observed and "timeout" in r.observed


def test_router_readiness(server, routes):
    assert probe_router_ready(server, timeout=4.0).status is Status.PASS
    routes["/readiness"] = (200, "application/json", {"status": "ready", "healthy_workers": 1, "total_workers": 2}, 0)
    r = probe_router_ready(server, timeout=4.0)
    assert r.status is Status.FAIL and r.observed == "1/2 workers healthy"
    assert probe_router_ready(server, timeout=4.0, require_all=False).status is Status.WARN
    routes["/readiness"] = (
        503,
        "application/json",
        {"status": "not_ready", "healthy_workers": 0, "total_workers": 2},
        0,
    )
    r = probe_router_ready(server, timeout=4.0)
    assert r.status is Status.FAIL and "not_ready" in r.observed


def test_judge_readiness_pure():
    assert judge_readiness(200, {"status": "ready", "healthy_workers": 2, "total_workers": 2}).status is Status.PASS
    assert (
        judge_readiness(200, {"status": "ready", "healthy_workers": 2, "total_workers": 2}, expect_workers=3).status
        is Status.FAIL
    )
    assert judge_readiness(200, "not json").status is Status.FAIL


# -- e2e --------------------------------------------------------------------------------------------------------
def test_probe_chat_passes_and_records_usage(server, routes):
    r = probe_chat(server, model="deepseek-v4-flash", prompt="hi", max_tokens=8, timeout=10)
    assert r.status is Status.PASS and r.layer == "e2e"
    assert r.data["usage"]["completion_tokens"] == 8 and r.data["finish_reason"] == "length"
    method, path, body = Stub.seen[-1]
    sent = json.loads(body)
    assert (method, path) == ("POST", "/v1/chat/completions")
    assert sent["model"] == "deepseek-v4-flash" and sent["max_tokens"] == 8
    assert sent["messages"] == [{"role": "user", "content": "hi"}]


def test_probe_chat_200_with_repeated_token_fails(server, routes):
    routes["/v1/chat/completions"] = (200, "application/json", chat_body("aaaa aaaa aaaa aaaa"), 0)
    r = probe_chat(server, model="m", timeout=10)
    assert r.status is Status.FAIL and "repeated" in r.detail


def test_probe_chat_non_200_bad_json_timeout_refused(server, routes, closed_port):
    routes["/v1/chat/completions"] = (503, "application/json", {"error": "no workers"}, 0)
    r = probe_chat(server, model="m", timeout=10)
    assert r.status is Status.FAIL and r.observed == "HTTP 503" and "no workers" in r.detail
    routes["/v1/chat/completions"] = (200, "application/json", {"unexpected": 1}, 0)
    assert probe_chat(server, model="m", timeout=10).status is Status.FAIL
    routes["/v1/chat/completions"] = (200, "application/json", chat_body("hello there"), 3.0)
    r = probe_chat(server, model="m", timeout=0.5)
    assert r.status is Status.FAIL and "0.5s" in r.observed
    r = probe_chat(closed_port, model="m", timeout=2)
    assert r.status is Status.FAIL and r.observed == "connection refused"


@pytest.mark.parametrize(
    "text,tokens,ok",
    [
        ("Hello! How can I help you today?", 8, True),
        ("aaaa aaaa aaaa", 8, False),
        ("aaaaaaaa", 8, False),
        ("!!!!!!!!", 8, False),
        ("thethethethe", 8, False),
        ("the the the the the", 5, False),
        ("", 0, False),
        ("   \n ", 4, False),
        (None, None, False),
        ("a", 1, True),
        ("aa", 2, True),  # too few tokens to call it repetition
        ("ok ok", 2, True),
        ("Yes, yes, I can.", 6, True),
        ("1 2 3 4", 4, True),
        ("aaaa aaaa aaab", 8, True),
        ("abcabcabc", None, False),  # unknown token count: judged on text
    ],
)
def test_judge_completion_content(text, tokens, ok):
    assert judge_completion_content(text, tokens)[0] is ok


# -- fetch_metrics ------------------------------------------------------------------------------------------------
def test_fetch_metrics_parses_the_capture(server, routes):
    m = fetch_metrics(server, timeout=5)
    assert m.select(N.TRANSFER_FAILED, tp_rank="0") == 0.0 and len(m) == 580


def test_fetch_metrics_404_hints_enable_metrics(server, routes):
    del routes["/metrics"]
    with pytest.raises(MetricsUnavailable) as ei:
        fetch_metrics(server, timeout=5)
    assert ei.value.status_code == 404 and "--enable-metrics" in ei.value.hint and ei.value.exit_code == 1


def test_fetch_metrics_unreachable_and_timeout_map_to_unreachable(server, routes, closed_port):
    with pytest.raises(UnreachableError) as ei:
        fetch_metrics(closed_port, timeout=2)
    assert ei.value.target == f"{closed_port}/metrics" and ei.value.exit_code == 3 and "refused" in ei.value.message
    routes["/metrics"] = (200, "text/plain", PROM, 3.0)
    with pytest.raises(UnreachableError, match="0.5s"):
        fetch_metrics(server, timeout=0.5)
