"""The host requests a keeper serves, as one function from a request to its JSON-ready value.

The keeper (keeper.py) answers each request with it on its kept SshTransport; a client that bypasses a keeper
that does not greet (kept.py) asks its own direct SshTransport through the same function, so a bypassed run gets
the very values (and errors) a kept one would.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from pdctl.transport.base import Transport
from pdctl.transport.wire import b64, unb64

HOST_OPS = ("open", "run", "read_file", "put_file", "http_base_url", "tunnel_failure")


def host_op(t: Transport, req: Mapping[str, Any]) -> Any:
    """The value of request `req` (`op` one of HOST_OPS, its arguments beside it) asked of `t`; raises what `t`
    raises, and ValueError for an op that is not a host request."""
    op = req.get("op")
    if op == "run":
        return dataclasses.asdict(t.run(str(req["command"]), timeout=float(req["timeout"]), env=req.get("env")))
    if op == "open":
        t.open()
        return None
    if op == "read_file":
        data = t.read_file(str(req["path"]), timeout=float(req["timeout"]))
        return None if data is None else b64(data)
    if op == "put_file":
        t.put_file(str(req["path"]), unb64(req["content"]), mode=int(req["mode"]))
        return None
    if op == "http_base_url":
        return t.http_base_url(int(req["port"]), host=str(req["host"]))
    if op == "tunnel_failure":
        return t.tunnel_failure(str(req["url"]), float(req.get("since", 0.0)))
    raise ValueError(f"unknown request {op!r}")
