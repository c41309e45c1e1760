"""pdctl.http_client over real sockets: a stdlib ThreadingHTTPServer speaking HTTP/1.1 on 127.0.0.1, and raw socket
servers for the framings and misbehaviours a stdlib handler will not produce (tests/fixtures/http_servers.py).
Connections are counted on the server side, so keep-alive reuse is what the server saw, not what the client says."""

from __future__ import annotations

import datetime
import threading
import time

import pytest

from pdctl import http_client as http
from pdctl.checks.e2e import probe_chat
from pdctl.checks.health import probe_health, probe_router_ready
from pdctl.checks.http_util import RoleURL, client, describe_error
from pdctl.checks.result import Status
from pdctl.checks.sampling import fetch_metrics
from pdctl.ops.readiness import _get as readiness_get
from tests.fixtures.http_servers import Handler, pattern, raw_server, read_request, serving, wait_until
from tests.fixtures.net import closed_port


@pytest.fixture(autouse=True)
def fresh_pool():
    http.close_all()
    yield
    http.close_all()



# -- framing ------------------------------------------------------------------------------------------------------
def test_content_length_and_chunked_bodies_and_case_insensitive_headers():
    with serving() as (srv, url):
        c = http.Client(4)
        r = c.get(f"{url}/bytes/100000")
        assert r.status_code == 200 and r.content == pattern(100000)
        assert r.headers["content-length"] == r.headers.get("Content-Length") == "100000"
        assert "CONTENT-TYPE" in r.headers and r.headers["Content-Type"] == "text/plain"
        assert isinstance(r.elapsed, datetime.timedelta) and r.elapsed.total_seconds() > 0
        r = c.get(f"{url}/chunked")
        assert r.content == b"hello chunked world" and r.text == "hello chunked world"
        r = c.post(f"{url}/echo", json={"a": [1, "é"]})
        assert r.json() == {"got": {"a": [1, "é"]}, "ctype": "application/json"}
        assert srv.accepted == 1


def test_close_delimited_and_odd_chunked_bodies_from_a_raw_server():
    answers = [b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the server closes",
               b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
               b"5;ext=1\r\nhello\r\nA\r\n, chunked!\r\n0\r\nX-Trailer: t\r\n\r\n",
               b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"]

    def serve(conn, index, stop):
        read_request(conn)
        conn.sendall(answers[index])

    with raw_server(serve) as srv:
        assert http.Client(4).get(srv.url).content == b"until the server closes"
        assert http.Client(4).get(srv.url).content == b"hello, chunked!"
        r = http.Client(4).get(srv.url)
        assert (r.status_code, r.content) == (204, b"")


def test_bodies_cut_short_or_not_http_are_remote_protocol_errors():
    answers = [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", b"SSH-2.0-OpenSSH_9.6\r\n",
               b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"]

    def serve(conn, index, stop):
        read_request(conn)
        conn.sendall(answers[index])

    with raw_server(serve) as srv:
        for needle in ("after 5 of 10 body bytes", "not an HTTP/1.x status line", "bad chunk size"):
            with pytest.raises(http.RemoteProtocolError, match=needle) as ei:
                http.Client(4).get(srv.url)
            assert describe_error(ei.value, 4).startswith("connection closed or bad HTTP (")


def test_bad_urls_are_refused_naming_the_url():
    for url in ("https://127.0.0.1/health", "127.0.0.1:30000/health", "http:///health", "http://h:port/",
                "http://127.0.0.1:1/a b"):
        with pytest.raises(http.InvalidURL, match="bad URL") as ei:
            http.Client(4).get(url)
        assert url in str(ei.value) and isinstance(ei.value, ValueError) and isinstance(ei.value, http.HTTPError)


# -- the pool -----------------------------------------------------------------------------------------------------
def test_sequential_requests_from_every_layer_share_one_connection():
    with serving() as (srv, url):
        for _ in range(3):
            assert probe_health(url).status is Status.PASS
            assert probe_router_ready(url).status is Status.PASS
            assert probe_chat(url, model="m").status is Status.PASS
            assert len(fetch_metrics(url)) == 1
            assert readiness_get(f"{url}/health", 3.0).status_code == 200
            with client(4) as c:    # leaving the `with` keeps the connection pooled
                assert c.get(f"{url}/chunked").content == b"hello chunked world"
        assert srv.accepted == 1


def test_a_connection_the_server_closed_while_idle_is_replaced_without_an_error():
    class IdleClosing(Handler):
        timeout = 0.2       # the server closes a keep-alive connection idle for 0.2 s

    with serving(IdleClosing) as (srv, url):
        for method, n in (("get", 1), ("post", 2), ("get", 3)):
            r = http.Client(4).get(f"{url}/bytes/10") if method == "get" else http.Client(4).post(url, json={})
            assert r.status_code == 200
            wait_until(lambda: srv.finished == n, "the server closing the idle connection")
        assert srv.accepted == 3


def test_junk_on_an_idle_connection_discards_it():
    def serve(conn, index, stop):
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
        if index == 0:
            stop.wait(0.1)      # the first answer is read and pooled; then an answer nobody asked for arrives
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\njunk")
            srv.junk_sent.set()
        stop.wait(10)

    with raw_server(serve) as srv:
        c = http.Client(4)
        assert c.get(srv.url).content == b"first"
        assert srv.junk_sent.wait(5)
        time.sleep(0.05)        # loopback delivery of the junk
        assert c.get(srv.url).content == b"first"
        assert srv.accepted == 2


def test_a_get_on_a_connection_closed_as_it_was_sent_goes_again_once_but_a_post_does_not():
    def serve(conn, index, stop):
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        if index == 0:
            read_request(conn)      # the second request arrives; the server closes without answering

    with raw_server(serve) as srv:
        c = http.Client(4)
        assert c.get(srv.url).content == b"ok"
        assert c.get(srv.url).content == b"ok"
        assert srv.accepted == 2
    with raw_server(serve) as srv:
        assert c.get(srv.url).content == b"ok"
        with pytest.raises(http.RemoteProtocolError, match="without sending a response"):
            c.post(srv.url, json={"n": 1})
        assert srv.accepted == 1


def test_connection_close_is_honoured_both_ways():
    def serve(conn, index, stop):   # says close when asked to, but keeps every connection open and answering
        while head := read_request(conn):
            close = b"/server-closes" in head.split(b"\r\n")[0]
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n" + (b"Connection: close\r\n" if close else b"")
                         + b"\r\nbye")

    with raw_server(serve) as srv:
        for _ in range(2):
            assert http.Client(4).get(f"{srv.url}/server-closes").content == b"bye"
        assert srv.accepted == 2
        for _ in range(2):
            assert http.Client(4).get(f"{srv.url}/client-closes", headers={"Connection": "close"}).content == b"bye"
        assert srv.accepted == 4
        for _ in range(2):
            assert http.Client(4).get(f"{srv.url}/keep").content == b"bye"
        assert srv.accepted == 5


def test_a_response_not_read_whole_or_with_extra_bytes_is_not_pooled():
    def serve(conn, index, stop):
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA" if index == 0 else
                     b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        stop.wait(10)

    with raw_server(serve) as srv:
        assert http.Client(4).get(srv.url).content == b"ok"
        assert http.Client(4).get(srv.url).content == b"ok"
        assert srv.accepted == 2


def test_concurrent_requests_each_get_their_whole_answer_and_idle_connections_are_capped():
    threads, rounds = 12, 5
    got: dict = {}
    barrier = threading.Barrier(threads)
    with serving() as (srv, url):
        def worker(i):
            barrier.wait()
            got[i] = [http.Client(10).get(f"{url}/bytes/{1000 * i + j}").content for j in range(rounds)]

        pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(30)
        assert got == {i: [pattern(1000 * i + j) for j in range(rounds)] for i in range(threads)}
        wait_until(lambda: srv.accepted - srv.finished <= http.IDLE_PER_HOST, "extra idle connections closed")
        before = srv.accepted
        for _ in range(http.IDLE_PER_HOST * 2):
            http.Client(4).get(f"{url}/bytes/1")
        assert srv.accepted == before      # the kept idle connections served these


def test_proxies_in_the_environment_are_ignored(monkeypatch):
    dead = f"http://127.0.0.1:{closed_port()}"
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, dead)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with serving() as (srv, url):
        assert http.Client(4).get(f"{url}/bytes/2").content == b"ab"


# -- failures and their words -------------------------------------------------------------------------------------
def test_refused_port_is_a_connect_error():
    url = f"http://127.0.0.1:{closed_port()}/health"
    with pytest.raises(http.ConnectError, match="refused") as ei:
        http.Client(4).get(url)
    assert describe_error(ei.value, 4) == "connection refused"


def test_a_server_that_never_answers_is_a_read_timeout_within_a_bounded_wait():
    with raw_server(lambda conn, index, stop: stop.wait(30)) as srv:
        t0 = time.monotonic()
        with pytest.raises(http.ReadTimeout) as ei:
            http.Client(0.3).get(srv.url)
        assert time.monotonic() - t0 < 5
        assert isinstance(ei.value, http.TimeoutException)
        assert describe_error(ei.value, 0.3) == "no response within 0.3s (read timeout)"


def test_a_trickling_server_is_bounded_and_its_connection_dropped():
    def serve(conn, index, stop):
        read_request(conn)
        if index == 0:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            for _ in range(150):            # a byte every 20 ms for 3 s: no single read ever waits 0.3 s
                if stop.wait(0.02):
                    return
                conn.sendall(b"x")
            return
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    with raw_server(serve) as srv:
        t0 = time.monotonic()
        with pytest.raises(http.ReadTimeout):
            http.Client(0.3).get(srv.url)
        assert time.monotonic() - t0 < 5
        assert http.Client(4).get(srv.url).content == b"ok"
        assert srv.accepted == 2


def test_the_tunnel_wording_comes_from_the_host_reason():
    def serve(conn, index, stop):   # what a tunnel whose channel did not open does: close the local connection
        pass

    with raw_server(serve) as srv:
        role = RoleURL(srv.url, label="prefill[0]@gpu1:30000", host="gpu1", remote="127.0.0.1:30000", tunnel=True,
                       failure=lambda since: "connection refused")
        with pytest.raises(http.RemoteProtocolError) as ei:
            http.Client(4).get(f"{role}/health")
        assert describe_error(ei.value, 4, role) == \
            "connection refused on gpu1 at 127.0.0.1:30000 (through the SSH tunnel)"
        assert probe_health(role).observed == "connection refused on gpu1 at 127.0.0.1:30000 (through the SSH tunnel)"


def test_connect_timeout_words():
    assert describe_error(http.ConnectTimeout("connect to 10.0.0.9:30000 timed out after 4s"), 4) == \
        "connect timed out after 4s"


def test_the_probe_paths_do_not_import_httpx():
    import subprocess
    import sys

    code = ("import sys\n"
            "from pdctl.checks import e2e, health, sampling\n"
            "from pdctl.ops import readiness, verify\n"
            f"url = 'http://127.0.0.1:{closed_port()}'\n"
            "health.probe_health(url); health.probe_router_ready(url); e2e.probe_chat(url)\n"
            "readiness._get(url + '/health', 1.0)\n"
            "try:\n    sampling.fetch_metrics(url)\nexcept Exception:\n    pass\n"
            "print(sorted(m for m in ('httpx', 'httpcore', 'trio', 'anyio') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
