"""The probes' HTTP client (pdctl.checks.http_util.client, the process's one httpx.Client) against the real servers
it probes (the bundled engine on uvicorn, the router and its Prometheus exporter): every endpoint a check reads
answers through it, one kept-alive connection per server serves every probe, and a streamed completion is read
whole."""

from __future__ import annotations

import os

import pytest

from pdctl.checks.e2e import probe_chat
from pdctl.checks.health import probe_health, probe_router_ready
from pdctl.checks.http_util import client
from pdctl.checks.metrics import parse_metrics
from pdctl.checks.result import Status
from pdctl.checks.sampling import fetch_metrics
from tests.fixtures.http_servers import close_http_client

pytestmark = pytest.mark.engine

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 6, "temperature": 0}


@pytest.fixture(autouse=True)
def fresh_client():
    """A new process client for each test, so the connections a test sees are its own; closed after it."""
    close_http_client()
    yield
    close_http_client()


def _local_port(response) -> int:
    """The local port of the connection a response came over (httpx's `network_stream` extension)."""
    return response.extensions["network_stream"].get_extra_info("client_addr")[1]


def _connections_to(url: str) -> int:
    """This process's established TCP connections to url's port: its socket fds matched in /proc/net/tcp."""
    port = int(url.rsplit(":", 1)[1])
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own fd, closed by now
            continue
        if link.startswith("socket:["):
            mine.add(link[len("socket:[") : -1])
    with open("/proc/net/tcp") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    return sum(1 for row in rows if row[3] == "01" and int(row[2].rsplit(":", 1)[1], 16) == port and row[9] in mine)


def _gets(stack) -> dict[str, str]:
    return {
        "prefill /health": f"{stack.prefill}/health",
        "decode /health": f"{stack.decode}/health",
        "router /health": f"{stack.router}/health",
        "router /readiness": f"{stack.router}/readiness",
        "router /workers": f"{stack.router}/workers",
        "prefill /server_info": f"{stack.prefill}/server_info",
        "decode /metrics": f"{stack.decode}/metrics",
        "router exporter /metrics": f"http://127.0.0.1:{stack.mp}/metrics",
        "decode 404": f"{stack.decode}/no-such-path",
    }


def test_every_endpoint_a_check_reads_answers_through_the_client(stack):
    for name, url in _gets(stack).items():
        r = client().get(url, timeout=10)
        assert r.status_code == (404 if name.endswith("404") else 200), (name, r.status_code, r.text[:200])
        if name.endswith("/metrics"):
            assert len(parse_metrics(r.text)) > 0, name
        elif name.startswith(("router /workers", "prefill /server_info", "router /readiness")):
            assert isinstance(r.json(), dict), name
    r = client().post(f"{stack.router}/v1/chat/completions", json=CHAT, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] and r.json()["usage"]["completion_tokens"] > 0


def test_one_kept_alive_connection_per_server(stack):
    paths = {
        stack.prefill: ("/health", "/metrics") * 2,
        stack.decode: ("/health", "/metrics") * 2,
        stack.router: ("/health", "/readiness", "/workers", "/readiness"),
        f"http://127.0.0.1:{stack.mp}": ("/metrics",) * 4,
    }
    for url, seq in paths.items():
        ports = set()
        for path in seq:
            r = client().get(url + path, timeout=10)
            assert r.status_code == 200, url + path
            ports.add(_local_port(r))
        assert len(ports) == 1, (url, ports)
    before = _local_port(client().get(f"{stack.router}/health", timeout=10))
    r = client().post(f"{stack.router}/v1/chat/completions", json=CHAT, timeout=60)
    assert r.status_code == 200 and _local_port(r) == before


def test_the_probes_pass_over_the_one_pool(stack):
    for _ in range(2):
        assert probe_health(stack.prefill).status is Status.PASS
        assert probe_health(stack.decode).status is Status.PASS
        assert probe_router_ready(stack.router, expect_workers=2).status is Status.PASS
        res = probe_chat(stack.router, model="tiny")
        assert res.status is Status.PASS, res.detail
        assert len(fetch_metrics(stack.decode)) > 0
    for url in (stack.prefill, stack.decode, stack.router):  # every probe of a server went over one connection
        assert _connections_to(url) == 1, url


def test_a_streamed_chat_completion_is_read_whole_from_its_chunks(stack):
    r = client().post(f"{stack.router}/v1/chat/completions", json={**CHAT, "stream": True}, timeout=60)
    assert r.status_code == 200
    assert r.headers.get("transfer-encoding") == "chunked"
    events = [line for line in r.text.splitlines() if line.startswith("data:")]
    assert len(events) >= 2 and events[-1] == "data: [DONE]"
