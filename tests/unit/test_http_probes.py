"""The probes' HTTP over real sockets on 127.0.0.1: the process's one httpx.Client (pdctl.checks.http_util.client)
shared by every layer and thread, proxies from the environment ignored, and the plain words each failure is said
in, tunnelled or not. Connections are counted on the server side (tests/fixtures/http_servers.py), so reuse is what
the server saw."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from pdctl.checks.e2e import probe_chat
from pdctl.checks.health import probe_health, probe_router_ready
from pdctl.checks.http_util import RoleURL, client, describe_error
from pdctl.checks.result import Status
from pdctl.checks.sampling import fetch_metrics
from pdctl.ops.readiness import _get as readiness_get
from tests.fixtures.http_servers import (
    Handler,
    close_http_client,
    pattern,
    raw_server,
    read_request,
    serving,
    wait_until,
)
from tests.fixtures.net import closed_port


@pytest.fixture(autouse=True)
def fresh_client():
    """A new process client for each test, so the connections a test sees are its own; closed after it."""
    close_http_client()
    yield
    close_http_client()


# -- one client, one pool -----------------------------------------------------------------------------------------
def test_every_thread_gets_the_one_client():
    got, barrier = [], threading.Barrier(8)

    def take():
        barrier.wait()
        got.append(client())

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(got) == 8 and all(c is got[0] for c in got) and isinstance(got[0], httpx.Client)


def test_sequential_requests_from_every_layer_share_one_connection():
    with serving() as (srv, url):
        for _ in range(3):
            assert probe_health(url).status is Status.PASS
            assert probe_router_ready(url).status is Status.PASS
            assert probe_chat(url, model="m").status is Status.PASS
            assert len(fetch_metrics(url)) == 1
            assert readiness_get(f"{url}/health", 3.0).status_code == 200
            assert client().get(f"{url}/chunked", timeout=4).content == b"hello chunked world"
        assert srv.accepted == 1


def test_a_connection_the_server_closed_while_idle_is_replaced_without_an_error():
    class IdleClosing(Handler):
        timeout = 0.2  # the server closes a keep-alive connection idle for 0.2 s

    with serving(IdleClosing) as (srv, url):
        for method, n in (("get", 1), ("post", 2), ("get", 3)):
            r = (
                client().get(f"{url}/bytes/10", timeout=4)
                if method == "get"
                else client().post(url, json={}, timeout=4)
            )
            assert r.status_code == 200
            wait_until(lambda: srv.finished == n, "the server closing the idle connection")
        assert srv.accepted == 3


def test_concurrent_requests_each_get_their_whole_answer_and_leave_their_connections_pooled():
    threads, rounds = 12, 5
    got: dict = {}
    barrier = threading.Barrier(threads)
    with serving() as (srv, url):

        def worker(i):
            barrier.wait()
            got[i] = [client().get(f"{url}/bytes/{1000 * i + j}", timeout=10).content for j in range(rounds)]

        pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(30)
        assert got == {i: [pattern(1000 * i + j) for j in range(rounds)] for i in range(threads)}
        before = srv.accepted
        assert before <= threads * rounds
        for _ in range(8):
            client().get(f"{url}/bytes/1", timeout=4)
        assert srv.accepted == before  # the kept idle connections served these


def test_proxies_in_the_environment_are_ignored(monkeypatch):
    dead = f"http://127.0.0.1:{closed_port()}"
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, dead)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with serving() as (srv, url):
        assert client().get(f"{url}/bytes/2", timeout=4).content == b"ab"


# -- failures and their words -------------------------------------------------------------------------------------
def test_refused_port_is_said_connection_refused():
    url = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(httpx.ConnectError) as ei:
        client().get(f"{url}/health", timeout=4)
    assert describe_error(ei.value, 4) == "connection refused"
    assert probe_health(url).observed == "connection refused"


def test_a_server_that_never_answers_is_a_read_timeout_and_its_connection_is_dropped():
    def serve(conn, index, stop):
        read_request(conn)
        if index == 0:
            stop.wait(30)  # never answers the first request
        else:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            stop.wait(10)

    with raw_server(serve) as srv:
        t0 = time.monotonic()
        with pytest.raises(httpx.ReadTimeout) as ei:
            client().get(srv.url, timeout=0.3)
        assert time.monotonic() - t0 < 5
        assert describe_error(ei.value, 0.3) == "no response within 0.3s (read timeout)"
        assert client().get(srv.url, timeout=4).content == b"ok"  # not on the connection given up on
        assert srv.accepted == 2


def test_bodies_cut_short_or_not_http_are_said_closed_or_bad_http():
    answers = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"SSH-2.0-OpenSSH_9.6\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ]

    def serve(conn, index, stop):
        read_request(conn)
        conn.sendall(answers[index])

    with raw_server(serve) as srv:
        for _ in answers:
            with pytest.raises(httpx.HTTPError) as ei:
                client().get(srv.url, timeout=4)
            assert describe_error(ei.value, 4).startswith("connection closed or bad HTTP ("), ei.value


def test_the_tunnel_wording_comes_from_the_host_reason():
    def serve(conn, index, stop):  # what a tunnel whose channel did not open does: close the local connection
        pass

    with raw_server(serve) as srv:
        role = RoleURL(
            srv.url,
            label="prefill[0]@gpu1:30000",
            host="gpu1",
            remote="127.0.0.1:30000",
            tunnel=True,
            failure=lambda since: "connection refused",
        )
        with pytest.raises(httpx.HTTPError) as ei:
            client().get(f"{role}/health", timeout=4)
        assert (
            describe_error(ei.value, 4, role)
            == "connection refused on gpu1 at 127.0.0.1:30000 (through the SSH tunnel)"
        )
        res = probe_health(role)
        assert res.observed == "connection refused on gpu1 at 127.0.0.1:30000 (through the SSH tunnel)"
        assert "prefill[0]@gpu1:30000" in res.detail and srv.url.rsplit(":", 1)[1] not in res.detail  # no local port


def test_timeout_words():
    assert describe_error(httpx.ConnectTimeout("timed out"), 4) == "connect timed out after 4s"
    assert describe_error(httpx.WriteTimeout("timed out"), 2.5) == "timed out after 2.5s"
