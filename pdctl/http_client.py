"""A small HTTP/1.1 client for the probes: ONE pool of keep-alive connections per process, keyed by (host, port),
shared by every layer and thread. Why not httpx: its import alone cost ~85 ms a run, and a client per probe meant
a new TCP connection per request. Only http:// (probes go to loopback, a host's address or an SSH tunnel's local
port); proxies from the environment are never used: a probe must reach the role itself."""

from __future__ import annotations

import datetime
import json as jsonlib
import select
import socket
import threading
import time
from typing import Any, Callable
from urllib.parse import urlsplit

IDLE_PER_HOST = 4               # idle keep-alive connections kept per (host, port); more are closed
MAX_HEADER_BYTES = 64 * 1024    # status line plus headers; more is not a server we talk to


class HTTPError(Exception):
    """Base of every failure to get an answer (a 4xx/5xx status is an answer, not an error)."""


class InvalidURL(HTTPError, ValueError):
    """Not an http://host[:port]/path URL."""


class ConnectError(HTTPError):
    """The TCP connection could not be made (refused, unreachable, name not resolved)."""


class TimeoutException(HTTPError):
    """The timeout ran out while connecting, sending or reading."""


class ConnectTimeout(TimeoutException):
    """No TCP connection within the timeout."""


class ReadTimeout(TimeoutException):
    """Connected and sent, but no whole answer within the timeout."""


class RemoteProtocolError(HTTPError):
    """The connection closed or broke before a whole answer came, or the answer is not HTTP/1.x."""


class Headers(dict):
    """Response headers by lower-cased name, looked up in any case; a repeated header's values joined by ', '."""

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and super().__contains__(name.lower())

    def get(self, name: str, default: Any = None) -> Any:
        return super().get(name.lower(), default)


class Response:
    """`elapsed`: the request's own time, from just before its connection was taken or made to the last body byte
    (neither a client's creation nor a thread's wait before sending is counted)."""

    def __init__(self, url: str, status_code: int, headers: Headers, content: bytes, elapsed: datetime.timedelta):
        self.url, self.status_code, self.headers, self.content = url, status_code, headers, content
        self.elapsed = elapsed

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")    # what we probe speaks UTF-8 (JSON, Prometheus)

    def json(self) -> Any:
        return jsonlib.loads(self.content)


class _Connection:
    """A socket and what was read ahead on it. Every wait is bounded by the request's deadline `end`: one timeout
    for the connect and each read, and for the whole request too (a server trickling bytes cannot hold a probe)."""

    def __init__(self, sock: socket.socket, key: tuple[str, int]):
        self.sock, self.key, self.buf = sock, key, bytearray()
        self.reused, self.received, self.end, self.timeout = False, 0, 0.0, 0.0

    def closed_by_peer(self) -> bool:
        """An idle keep-alive connection has nothing to read: readable means EOF (the server closed it) or junk."""
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        return bool(poller.poll(0))

    def _io(self, timeout_error: type[TimeoutException], doing: str, op: Callable[[], Any]) -> Any:
        try:
            if (left := self.end - time.monotonic()) <= 0:
                raise socket.timeout
            self.sock.settimeout(left)
            return op()
        except socket.timeout:
            raise timeout_error(f"timed out after {self.timeout:g}s {doing}") from None
        except OSError as e:
            raise RemoteProtocolError(f"connection lost {doing} ({e.strerror or e})") from None

    def send(self, data: bytes, end: float, timeout: float) -> None:
        self.end, self.timeout, self.received = end, timeout, 0
        self._io(TimeoutException, "sending the request", lambda: self.sock.sendall(data))

    def recv(self) -> bool:
        """Add what has come to buf; False at EOF."""
        data = self._io(ReadTimeout, "reading the response", lambda: self.sock.recv(65536))
        self.buf += data
        self.received += len(data)
        return bool(data)

    def read_line(self) -> bytes:
        while (end := self.buf.find(b"\n")) < 0:
            if len(self.buf) > MAX_HEADER_BYTES:
                raise RemoteProtocolError(f"a header line over {MAX_HEADER_BYTES} bytes")
            if not self.recv():
                raise RemoteProtocolError("server closed the connection " +
                                          ("mid-answer" if self.received else "without sending a response"))
        return self.take(end + 1)

    def read_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self.recv():
                raise RemoteProtocolError(f"server closed the connection after {len(self.buf)} of {n} body bytes")
        return self.take(n)

    def take(self, n: int) -> bytes:
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data


_lock = threading.Lock()
_idle: dict[tuple[str, int], list[_Connection]] = {}    # the pool: idle connections by (host, port)


def _take_idle(key: tuple[str, int]) -> _Connection | None:
    """An idle connection to key that its server has not closed meanwhile, or None."""
    while True:
        with _lock:
            if not _idle.get(key):
                return None
            conn = _idle[key].pop()
        if not conn.closed_by_peer():
            conn.reused = True
            return conn
        conn.sock.close()


def close_all() -> None:
    """Close every idle pooled connection (tests, long-running processes); the pool stays usable."""
    with _lock:
        conns = [c for idle in _idle.values() for c in idle]
        _idle.clear()
    for conn in conns:
        conn.sock.close()


def _connect(key: tuple[str, int], end: float, timeout: float) -> _Connection:
    # an ASCII host as bytes: a str host makes the socket module load the idna codec (~6 ms a run)
    host = key[0].encode("ascii") if key[0].isascii() else key[0]
    try:
        sock = socket.create_connection((host, key[1]), timeout=max(end - time.monotonic(), 0.001))
    except socket.timeout:
        raise ConnectTimeout(f"connect to {key[0]}:{key[1]} timed out after {timeout:g}s") from None
    except socket.gaierror as e:
        raise ConnectError(f"getaddrinfo {key[0]}: {e.strerror or e}") from None
    except OSError as e:
        raise ConnectError(f"{e.strerror or e} ({key[0]}:{key[1]})") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return _Connection(sock, key)


def _split(url: str) -> tuple[tuple[str, int], str, str]:
    """((host, port), Host header, request target) of an http:// URL; InvalidURL naming it otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port or 80
    except ValueError as e:
        raise InvalidURL(f"bad URL {url!r}: {e}") from None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if parts.scheme != "http" or not parts.hostname or any(ord(ch) <= 32 or ord(ch) == 127 for ch in target):
        raise InvalidURL(f"bad URL {url!r}: not http://host[:port]/path (only plain http:// is spoken)")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return (parts.hostname, port), host if port == 80 else f"{host}:{port}", target


def _read_headers(conn: _Connection) -> Headers:
    headers, size = Headers(), 0
    while (line := conn.read_line()) not in (b"\r\n", b"\n"):
        name, colon, value = line.decode("latin-1").partition(":")
        if not colon or (size := size + len(line)) > MAX_HEADER_BYTES:
            raise RemoteProtocolError(f"bad header line {line[:60]!r}" if not colon else "headers too large")
        name, value = name.strip().lower(), value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


def _read_chunked(conn: _Connection) -> bytes:
    body = bytearray()
    while True:
        line = conn.read_line()
        size = line.split(b";", 1)[0].strip()
        if not size or size.strip(b"0123456789abcdefABCDEF"):
            raise RemoteProtocolError(f"bad chunk size line {line[:40]!r}")
        if int(size, 16) == 0:
            _read_headers(conn)     # trailers, unused
            return bytes(body)
        chunk = conn.read_exact(int(size, 16) + 2)
        if chunk[-2:] != b"\r\n":
            raise RemoteProtocolError("a chunk not followed by CRLF")
        body += chunk[:-2]


def _read_response(conn: _Connection, method: str) -> tuple[int, Headers, bytes, bool]:
    """(status, headers, body, whether the connection may serve another request)."""
    while True:
        line = conn.read_line().decode("latin-1").rstrip("\r\n")
        version, _, rest = line.partition(" ")
        if not version.startswith("HTTP/1.") or not rest[:3].isdigit() or rest[3:4] not in ("", " "):
            raise RemoteProtocolError(f"not an HTTP/1.x status line: {line[:60]!r}")
        status, headers = int(rest[:3]), _read_headers(conn)
        if not 100 <= status < 200:     # a 1xx is an interim answer: the real one follows
            break
    tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    reusable = "close" not in tokens and (version != "HTTP/1.0" or "keep-alive" in tokens)
    length = headers.get("content-length")
    if method == "HEAD" or status in (204, 304):
        body = b""
    elif "chunked" in headers.get("transfer-encoding", "").lower():
        body = _read_chunked(conn)
    elif length is not None:
        if not length.strip().isdigit():
            raise RemoteProtocolError(f"bad Content-Length {length!r}")
        body = conn.read_exact(int(length))
    else:                           # no framing: the body ends when the server closes
        while conn.recv():
            pass
        body, reusable = conn.take(len(conn.buf)), False
    return status, headers, body, reusable


def request(method: str, url: str, *, timeout: float, headers: dict[str, str] | None = None,
            content: bytes | None = None) -> Response:
    """Send one request over a pooled connection (or a new one) and read the whole answer."""
    key, host, target = _split(url)
    fields = {"host": ("Host", host), "user-agent": ("User-Agent", "pdctl"), "accept": ("Accept", "*/*"),
              "accept-encoding": ("Accept-Encoding", "identity")}
    fields.update({k.lower(): (k, v) for k, v in (headers or {}).items()})
    if content is not None:
        fields["content-length"] = ("Content-Length", str(len(content)))
    head = "".join(f"{k}: {v}\r\n" for k, v in fields.values())
    if head.count("\n") != len(fields) or head.count("\r") != len(fields):
        raise ValueError(f"a header of the request to {url} contains a line break")
    payload = f"{method} {target} HTTP/1.1\r\n{head}\r\n".encode("latin-1") + (content or b"")
    started = time.monotonic()
    end = started + timeout
    conn = _take_idle(key) or _connect(key, end, timeout)
    while True:
        try:
            conn.send(payload, end, timeout)
            status, got, body, reusable = _read_response(conn, method)
            break
        except BaseException as e:
            conn.sock.close()
            # a reused connection its server closed as we sent: nothing was answered, so a GET goes again on a new one
            if not (isinstance(e, RemoteProtocolError) and conn.reused and not conn.received and method == "GET"):
                raise
            conn = _connect(key, end, timeout)
    elapsed = datetime.timedelta(seconds=time.monotonic() - started)
    with _lock:     # back to the pool only when whole, reusable, and there is room
        pooled = reusable and not conn.buf and "close" not in fields.get("connection", ("", ""))[1].lower() \
            and len(_idle.setdefault(key, [])) < IDLE_PER_HOST
        if pooled:
            _idle[key].append(conn)
    if not pooled:
        conn.sock.close()
    return Response(url, status, got, body, elapsed)


class Client:
    """A handle on the process's pool with one timeout: `with Client(4.0) as c: c.get(url)`. Leaving the `with`
    closes nothing: the connections stay pooled for the next probe (close_all() closes them)."""

    def __init__(self, timeout: float = 5.0):
        self.timeout = timeout

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def get(self, url: str, headers: dict[str, str] | None = None) -> Response:
        return request("GET", url, timeout=self.timeout, headers=headers)

    def post(self, url: str, json: Any = None, headers: dict[str, str] | None = None) -> Response:
        sent = {"Content-Type": "application/json", **(headers or {})}
        return request("POST", url, timeout=self.timeout, headers=sent, content=jsonlib.dumps(json).encode())
