"""pdctl.http_client over real sockets: a stdlib ThreadingHTTPServer speaking HTTP/1.1 on 127.0.0.1, and raw socket
servers for the framings and misbehaviours a stdlib handler will not produce. Connections are counted on the
server side, so keep-alive reuse is what the server saw, not what the client says."""

from __future__ import annotations

import datetime
import json
import socket
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from pdctl import http_client as http
from pdctl.checks.e2e import probe_chat
from pdctl.checks.health import probe_health, probe_router_ready
from pdctl.checks.http_util import RoleURL, client, describe_error
from pdctl.checks.result import Status
from pdctl.checks.sampling import fetch_metrics
from pdctl.ops.readiness import _get as readiness_get
from tests.fixtures.net import closed_port, free_port

METRICS = '# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{tp_rank="0"} 0.0\n'
CHAT = {"choices": [{"message": {"content": "the quick brown fox"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 4}}


def pattern(n: int) -> bytes:
    return bytes(ord("a") + i % 26 for i in range(n))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"     # keep-alive, as uvicorn and the router speak
    disable_nagle_algorithm = True    # as they do: headers and body are two writes

    def log_message(self, *args):
        pass

    def _send(self, code: int, body: bytes, ctype: str = "text/plain", close: bool = False) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in (b"hello ", b"chunked ", b"world"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/close":
            self._send(200, b"bye", close=True)
        elif self.path.startswith("/bytes/"):
            self._send(200, pattern(int(self.path.rsplit("/", 1)[1])))
        elif self.path == "/readiness":
            self._send(200, json.dumps({"status": "ready", "healthy_workers": 2, "total_workers": 2}).encode(),
                       "application/json")
        elif self.path == "/metrics":
            self._send(200, METRICS.encode())
        else:
            self._send(200, b"ok")

    def do_POST(self):
        sent = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = CHAT if self.path == "/v1/chat/completions" else {"got": sent, "ctype": self.headers["Content-Type"]}
        self._send(200, json.dumps(body).encode(), "application/json")


class CountingServer(ThreadingHTTPServer):
    """Counts the TCP connections it accepted and the ones whose handler has finished (closed)."""
    daemon_threads = True
    request_queue_size = 64     # twelve threads connecting at once overflow the default backlog of 5

    def __init__(self, handler):
        super().__init__(("127.0.0.1", free_port()), handler)
        self.accepted = self.finished = 0
        self.count_lock = threading.Lock()

    def process_request(self, request, client_address):
        with self.count_lock:
            self.accepted += 1
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        super().shutdown_request(request)
        with self.count_lock:
            self.finished += 1


@contextmanager
def serving(handler=Handler):
    srv = CountingServer(handler)
    th = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    th.start()
    try:
        yield srv, f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
        th.join(5)


@pytest.fixture(autouse=True)
def fresh_pool():
    http.close_all()
    yield
    http.close_all()


def wait_until(pred, what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"not seen within {timeout}s: {what}"
        time.sleep(0.01)


def read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        got = conn.recv(65536)
        if not got:
            return b""
        data += got
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length")), 0)
    while len(body) < length:
        body += conn.recv(65536)
    return head


@contextmanager
def raw_server(serve):
    """A listening socket; each accepted connection is handed to serve(conn, index, stop) in its own thread."""
    lsock = socket.create_server(("127.0.0.1", free_port()))
    state = SimpleNamespace(accepted=0, stop=threading.Event(), junk_sent=threading.Event())
    state.url = f"http://127.0.0.1:{lsock.getsockname()[1]}"

    def run(conn, index):
        try:
            serve(conn, index, state.stop)
        except OSError:
            pass
        finally:
            conn.close()

    def accept_loop():
        while True:
            try:
                conn, _ = lsock.accept()
            except OSError:
                return
            state.accepted += 1     # counted before serving: a client that got its answer sees the count
            threading.Thread(target=run, args=(conn, state.accepted - 1), daemon=True).start()

    th = threading.Thread(target=accept_loop, daemon=True)
    th.start()
    try:
        yield state
    finally:
        state.stop.set()
        lsock.shutdown(socket.SHUT_RDWR)
        lsock.close()
        th.join(5)


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
