"""Shared bits of the HTTP probes: one client factory and a plain-words cause for a failed request."""

from __future__ import annotations

from typing import Any


def client(timeout: float) -> Any:
    """An httpx.Client with one timeout for connect/read/write/pool. Proxies from the environment are ignored:
    probes go straight to the role's address (loopback or a tunnel), never through a proxy."""
    import httpx

    return httpx.Client(timeout=httpx.Timeout(timeout), trust_env=False, follow_redirects=False)


def request_ms(response: Any, started: float) -> float:
    """The request's own latency in ms: httpx's `response.elapsed` (request sent -> response read), so neither
    the client's creation nor a thread's wait before sending is counted; with no response (an error), the clock
    since `started`, which the caller takes right before sending."""
    import time

    elapsed = getattr(response, "elapsed", None) if response is not None else None
    try:
        seconds = elapsed.total_seconds() if elapsed is not None else time.monotonic() - started
    except RuntimeError:   # httpx raises when .elapsed is read before the response is closed
        seconds = time.monotonic() - started
    return round(seconds * 1000, 1)


def join(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + "/" + path.lstrip("/")


def describe_error(exc: BaseException, timeout: float) -> str:
    """'connection refused', 'timed out after 4s (read)', ... for an httpx exception."""
    import httpx

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
        if "name or service not known" in low or "nodename nor servname" in low or "getaddrinfo" in low:
            return f"name resolution failed ({msg})"
        return f"connect failed ({msg})"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"connection closed or bad HTTP ({exc})"
    if isinstance(exc, httpx.HTTPError):
        return f"{type(exc).__name__}: {exc}"
    return f"{type(exc).__name__}: {exc}"
