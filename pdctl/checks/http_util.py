"""Shared bits of the HTTP probes: the process's one httpx client and a plain-words cause for a failed request."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import httpx


class RoleURL(str):
    """A role's base URL (what this machine sends to: the address itself, or an SSH tunnel's local port) that also
    knows what it reaches, so that messages name the role and its address on its host, never a tunnel's port.

    `label` the role's inventory label ("prefill[0]@gpu1:30000"), `host` its host's name, `remote` the address
    probed on that host ("127.0.0.1:30000"), `tunnel` whether requests go through an SSH tunnel, `failure(since)`
    the host's reason for a tunnel connection that failed at or after monotonic `since` (e.g. "connection
    refused"), None when unknown."""

    label: str
    host: str
    remote: str
    tunnel: bool
    failure: Callable[[float], "str | None"]

    def __new__(
        cls,
        url: str,
        *,
        label: str,
        host: str,
        remote: str,
        tunnel: bool = False,
        failure: Callable[[float], "str | None"] | None = None,
    ) -> "RoleURL":
        self = super().__new__(cls, url)
        self.label, self.host, self.remote, self.tunnel = label, host, remote, tunnel
        self.failure = failure or (lambda _since: None)
        return self


def request_name(base_url: str, path: str = "") -> str:
    """How a request to base_url+path is named in results and errors: '/health of prefill[0]@gpu1:30000' for a
    RoleURL (a tunnel's local port means nothing to an operator), the plain URL otherwise."""
    if isinstance(base_url, RoleURL):
        return f"{path or '/'} of {base_url.label}"
    return join(base_url, path)


def remote_url(base_url: str, path: str = "") -> str:
    """The URL as the host sees it (http://127.0.0.1:30000/health for a tunnelled role), for JSON data."""
    if isinstance(base_url, RoleURL) and base_url.tunnel:
        return join(f"http://{base_url.remote}", path)
    return join(base_url, path)


_lock = threading.Lock()
_client: "httpx.Client | None" = None


def client() -> "httpx.Client":
    """The process's one httpx.Client: one connection pool shared by every layer and thread (httpx's docs: a Client
    "can be shared between threads"), so a probe reuses the kept-alive connection the last one left. Give each
    request its timeout (`client().get(url, timeout=t)`) and never close it. Settings from the environment, proxies
    included, are ignored (`trust_env=False`): a probe goes straight to the role's address (loopback, a host's, or
    an SSH tunnel's local port). Only http:// is spoken, so the client loads no CA bundle (that costs about what
    httpx's import does): an https:// URL fails verification. An idle connection is dropped after 4 s, before a
    server's keep-alive timeout (uvicorn's default is 5 s) can close it under a request; no limit on connections,
    so no probe waits for another's."""
    global _client
    with _lock:
        if _client is None:
            import ssl

            import httpx

            _client = httpx.Client(
                trust_env=False,
                verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT),
                headers={"User-Agent": "pdctl"},
                limits=httpx.Limits(max_connections=None, keepalive_expiry=4.0),
            )
        return _client


def request_ms(response: Any, started: float) -> float:
    """The request's own latency in ms: httpx's `response.elapsed` (sending -> the body read), so neither the
    client's creation nor a thread's wait before sending is counted; with no response (an error), the clock since
    `started`, which the caller takes right before sending."""
    elapsed = getattr(response, "elapsed", None) if response is not None else None
    seconds = elapsed.total_seconds() if elapsed is not None else time.monotonic() - started
    return round(seconds * 1000, 1)


def join(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + "/" + path.lstrip("/")


def describe_error(exc: BaseException, timeout: float, base_url: str = "", since: float | None = None) -> str:
    """'connection refused', 'timed out after 4s', ... for an httpx exception. Through an SSH tunnel a role that is
    down only shows as a closed local connection: the host's own reason is said instead ("connection refused on
    gpu1 at 127.0.0.1:30000 (through the SSH tunnel)"), for a tunnel failure at or after monotonic `since` (the
    request's start; default a minute ago)."""
    import httpx

    if isinstance(base_url, RoleURL) and base_url.tunnel and not isinstance(exc, httpx.TimeoutException):
        why = base_url.failure(time.monotonic() - 60 if since is None else since)
        if why:
            return f"{why} on {base_url.host} at {base_url.remote} (through the SSH tunnel)"

    if isinstance(exc, httpx.ConnectTimeout):
        return f"connect timed out after {timeout:g}s"
    if isinstance(exc, httpx.ReadTimeout):
        return f"no response within {timeout:g}s (read timeout)"
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out after {timeout:g}s"
    if isinstance(exc, httpx.ConnectError):
        msg = str(exc) or type(exc).__name__
        low = msg.lower()
        if "refused" in low:
            return "connection refused"
        if "name or service not known" in low or "nodename nor servname" in low or "name resolution" in low:
            return f"name resolution failed ({msg})"
        return f"connect failed ({msg})"
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return f"connection closed or bad HTTP ({str(exc) or type(exc).__name__})"
    return f"{type(exc).__name__}: {exc}"
