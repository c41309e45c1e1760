"""Shared bits of the HTTP probes: one client factory and a plain-words cause for a failed request."""

from __future__ import annotations

import time
from typing import Any, Callable


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

    def __new__(cls, url: str, *, label: str, host: str, remote: str, tunnel: bool = False,
                failure: Callable[[float], "str | None"] | None = None) -> "RoleURL":
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


def client(timeout: float) -> Any:
    """A handle on the process's one connection pool (pdctl.http_client) with one timeout for the connect, each
    read and the whole request. `with client(t) as c:` closes nothing: the next probe reuses the connection.
    Proxies from the environment are ignored: probes go straight to the role's address (loopback or a tunnel)."""
    from pdctl.http_client import Client

    return Client(timeout)


def request_ms(response: Any, started: float) -> float:
    """The request's own latency in ms: `response.elapsed` (connection taken -> last body byte), so neither the
    client's creation nor a thread's wait before sending is counted; with no response (an error), the clock since
    `started`, which the caller takes right before sending."""
    elapsed = getattr(response, "elapsed", None) if response is not None else None
    seconds = elapsed.total_seconds() if elapsed is not None else time.monotonic() - started
    return round(seconds * 1000, 1)


def join(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + "/" + path.lstrip("/")


def describe_error(exc: BaseException, timeout: float, base_url: str = "", since: float | None = None) -> str:
    """'connection refused', 'timed out after 4s (read)', ... for a pdctl.http_client exception. Through an SSH
    tunnel a role that is down only shows as a closed local connection: the host's own reason is said instead
    ("connection refused on gpu1 at 127.0.0.1:30000 (through the SSH tunnel)"), for a tunnel failure at or after
    monotonic `since` (the request's start; default a minute ago)."""
    from pdctl import http_client as http

    if isinstance(base_url, RoleURL) and base_url.tunnel and not isinstance(exc, http.TimeoutException):
        why = base_url.failure(time.monotonic() - 60 if since is None else since)
        if why:
            return f"{why} on {base_url.host} at {base_url.remote} (through the SSH tunnel)"

    if isinstance(exc, http.ConnectTimeout):
        return f"connect timed out after {timeout:g}s"
    if isinstance(exc, http.ReadTimeout):
        return f"no response within {timeout:g}s (read timeout)"
    if isinstance(exc, http.TimeoutException):
        return f"timed out after {timeout:g}s"
    if isinstance(exc, http.ConnectError):
        msg = str(exc) or type(exc).__name__
        low = msg.lower()
        if "refused" in low:
            return "connection refused"
        if "name or service not known" in low or "nodename nor servname" in low or "getaddrinfo" in low:
            return f"name resolution failed ({msg})"
        return f"connect failed ({msg})"
    if isinstance(exc, http.RemoteProtocolError):
        return f"connection closed or bad HTTP ({exc})"
    return f"{type(exc).__name__}: {exc}"
