"""pdctl.http_client against the real servers it probes (the bundled engine on uvicorn, sglang-router and its
Prometheus exporter), with httpx as the independent client: same answers, one kept-alive connection per server,
and the probes pass over the pool."""

from __future__ import annotations

import httpx
import pytest

from pdctl import http_client as http
from pdctl.checks.e2e import probe_chat
from pdctl.checks.health import probe_health, probe_router_ready
from pdctl.checks.metrics import parse_metrics
from pdctl.checks.result import Status
from pdctl.checks.sampling import fetch_metrics

pytestmark = pytest.mark.engine

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 6, "temperature": 0}


@pytest.fixture(autouse=True)
def fresh_pool():
    http.close_all()
    yield
    http.close_all()


def _local_port(url: str) -> int:
    """The local port of the one idle pooled connection to url's server (the pool holds exactly one)."""
    key = ("127.0.0.1", int(url.rsplit(":", 1)[1]))
    idle = http._idle.get(key, [])
    assert len(idle) == 1, idle
    return idle[0].sock.getsockname()[1]


def _gets(stack) -> dict[str, str]:
    return {"prefill /health": f"{stack.prefill}/health", "decode /health": f"{stack.decode}/health",
            "router /health": f"{stack.router}/health", "router /readiness": f"{stack.router}/readiness",
            "router /workers": f"{stack.router}/workers", "prefill /server_info": f"{stack.prefill}/server_info",
            "decode /metrics": f"{stack.decode}/metrics",
            "router exporter /metrics": f"http://127.0.0.1:{stack.mp}/metrics",
            "decode 404": f"{stack.decode}/no-such-path"}


def test_same_answers_as_httpx_from_every_real_server(stack):
    ours = http.Client(10)
    for name, url in _gets(stack).items():
        mine, theirs = ours.get(url), httpx.get(url, timeout=10)
        assert mine.status_code == theirs.status_code, name
        assert mine.headers.get("content-type") == theirs.headers.get("content-type"), name
        if name.endswith("/metrics"):       # counters move between the two reads: compare the series
            assert parse_metrics(mine.text).families().keys() == parse_metrics(theirs.text).families().keys(), name
        elif name.startswith(("router /workers", "prefill /server_info")):
            assert mine.json().keys() == theirs.json().keys(), name
        else:
            assert mine.content == theirs.content, name
    mine = ours.post(f"{stack.router}/v1/chat/completions", json=CHAT)
    theirs = httpx.post(f"{stack.router}/v1/chat/completions", json=CHAT, timeout=60)
    assert mine.status_code == theirs.status_code == 200, mine.text
    assert mine.json()["choices"][0]["message"] == theirs.json()["choices"][0]["message"]
    assert mine.json()["usage"] == theirs.json()["usage"]


def test_one_kept_alive_connection_per_server(stack):
    c = http.Client(10)
    paths = {stack.prefill: ("/health", "/metrics") * 2, stack.decode: ("/health", "/metrics") * 2,
             stack.router: ("/health", "/readiness", "/workers", "/readiness"),
             f"http://127.0.0.1:{stack.mp}": ("/metrics",) * 4}
    for url, seq in paths.items():
        ports = set()
        for path in seq:
            assert c.get(url + path).status_code == 200, url + path
            ports.add(_local_port(url))
        assert len(ports) == 1, (url, ports)
    before = _local_port(stack.router)
    assert c.post(f"{stack.router}/v1/chat/completions", json=CHAT).status_code == 200
    assert _local_port(stack.router) == before


def test_the_probes_pass_over_the_pool(stack):
    for _ in range(2):
        assert probe_health(stack.prefill).status is Status.PASS
        assert probe_health(stack.decode).status is Status.PASS
        assert probe_router_ready(stack.router, expect_workers=2).status is Status.PASS
        res = probe_chat(stack.router, model="tiny")
        assert res.status is Status.PASS, res.detail
        assert len(fetch_metrics(stack.decode)) > 0
    assert _local_port(stack.router) and _local_port(stack.decode) and _local_port(stack.prefill)


def test_a_streamed_chat_completion_is_read_whole_from_its_chunks(stack):
    body = {**CHAT, "stream": True}
    mine = http.Client(60).post(f"{stack.router}/v1/chat/completions", json=body)
    theirs = httpx.post(f"{stack.router}/v1/chat/completions", json=body, timeout=60)
    assert mine.status_code == theirs.status_code == 200
    assert mine.headers.get("transfer-encoding") == theirs.headers.get("transfer-encoding") == "chunked"
    events = [line for line in mine.text.splitlines() if line.startswith("data:")]
    assert len(events) == len([line for line in theirs.text.splitlines() if line.startswith("data:")]) >= 2
    assert events[-1] == "data: [DONE]"
