"""latency_ms is the request's own time: not the client's creation, not the wait before sending (issue 10, item 6).

A real HTTP server whose handler sleeps a known 50 ms; the probes' client factory is made slow (300 ms) the way a
cold import, a thread pool or a tunnel set-up makes it slow. The reported latency stays within 20% + 5 ms of the
handler's time.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pdctl.checks import e2e, health, http_util
from pdctl.checks.result import Status
from tests.fixtures.net import closed_port

HANDLER_S = 0.050
SLOW_CLIENT_S = 0.300


def _close_to_handler(ms: float) -> bool:
    return abs(ms - HANDLER_S * 1000) <= HANDLER_S * 1000 * 0.2 + 5


class _Sleepy(BaseHTTPRequestHandler):
    def _answer(self, doc: dict) -> None:
        time.sleep(HANDLER_S)
        body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/readiness":
            self._answer({"status": "ready", "healthy_workers": 2, "total_workers": 2})
        else:
            self._answer({})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer(
            {
                "choices": [{"message": {"content": "the quick brown fox"}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 4},
            }
        )

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Sleepy)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def slow_client(monkeypatch):
    def slow():
        time.sleep(SLOW_CLIENT_S)
        return http_util.client()

    monkeypatch.setattr(health, "client", slow)
    monkeypatch.setattr(e2e, "client", slow)


def test_health_latency_is_the_request_not_the_client_creation(server, slow_client):
    t0 = time.monotonic()
    res = health.probe_health(server, timeout=4)
    wall_ms = (time.monotonic() - t0) * 1000
    assert res.status is Status.PASS
    assert wall_ms >= SLOW_CLIENT_S * 1000  # the slow creation did happen...
    assert _close_to_handler(res.data["latency_ms"]), res.data  # ...and is not in the figure
    assert res.detail == f"{res.data['latency_ms']:g} ms"


def test_router_readiness_latency_is_the_request(server, slow_client):
    res = health.probe_router_ready(server, timeout=4)
    assert res.status is Status.PASS
    assert _close_to_handler(res.data["latency_ms"]), res.data


def test_chat_latency_is_the_request(server, slow_client):
    res = e2e.probe_chat(server, model="m", timeout=4)
    assert res.status is Status.PASS, res.detail
    assert _close_to_handler(res.data["latency_ms"]), res.data
    assert f"in {res.data['latency_ms']:g} ms" in res.observed


def test_a_refused_request_is_timed_without_the_client_creation(slow_client):
    res = health.probe_health(f"http://127.0.0.1:{closed_port()}", timeout=4)
    assert res.status is Status.FAIL and res.data["error"] == "connection refused"
    assert res.data["latency_ms"] < SLOW_CLIENT_S * 1000 / 3
