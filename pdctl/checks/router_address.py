"""The router address an operator names (`pdctl storm --router`, a playbook storm step's `router`): "host:port" or
"http://host:port", checked part by part so a bad one is refused naming the bad part. Pure."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

_LABEL = re.compile(r"^router\[\d+\]@")  # pdctl's own name of a router, "router[0]@gpu1:30001"


class RouterAddress(NamedTuple):
    host: str  # as given, without IPv6 brackets
    port: int  # 1-65535


def parse_router_address(text: Any) -> RouterAddress:
    """(host, port) of `text` (host:port, http://host:port, or a label "router[0]@HOST:PORT", HOST then the
    inventory's name of the host); raises ValueError saying which part is wrong (the scheme, a path, the host, the
    port: not a number, out of 1-65535, or a second ':')."""
    if not isinstance(text, str):
        raise ValueError(f"give host:port as text (got {type(text).__name__} {text!r})")
    rest = _LABEL.sub("", text.strip(), count=1)
    if "://" in rest:
        scheme, rest = rest.split("://", 1)
        if scheme.lower() != "http":
            raise ValueError(f"scheme {scheme!r}: only http:// (or plain host:port)")
        rest = rest.rstrip("/")
    if "/" in rest or "?" in rest or "#" in rest or "@" in rest:
        raise ValueError("give only host:port (no path, query or user)")
    if rest.startswith("["):  # an IPv6 address, "[::1]:30001"
        host, sep, tail = rest[1:].partition("]")
        if not sep or not tail.startswith(":"):
            raise ValueError("give [IPv6]:port")
        port_text = tail[1:]
    else:
        host, sep, port_text = rest.rpartition(":")
        if not sep:
            raise ValueError("no port (give host:port)")
        if ":" in host:
            raise ValueError("more than one ':' (give host:port; an IPv6 address goes in brackets)")
    if not host:
        raise ValueError("no host (give host:port)")
    if not port_text.isascii() or not port_text.isdigit():
        raise ValueError(f"port {port_text!r} is not a number 1-65535")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} is out of range 1-65535")
    return RouterAddress(host, port)
