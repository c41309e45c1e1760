"""The keeper's wire format: length-prefixed JSON frames on a unix socket, and errors carried across it typed.

A frame is a 4-byte big-endian length then that many bytes of UTF-8 JSON; bytes travel as base64 text. An error
crosses as {"type", "message", "hint", "target"} and is raised on the client as the same pdctl.errors class (so the
same exit code): UnreachableError, HostKeyRefused, StepFailed, UsageError, ... A ValueError (a bad env name) stays
a ValueError; anything else the keeper did not expect is "unknown" (UnreachableError), never a wrong answer.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
from typing import Any

from pdctl import errors
from pdctl.errors import PdctlError, UnreachableError

PROTOCOL = 1  # part of the socket name: a pdctl speaking another protocol never reuses a keeper
MAX_FRAME = 64 * 1024 * 1024  # a length beyond this is garbage, not a request
_HEADER = struct.Struct(">I")


class PeerClosed(ConnectionError):
    """The other end closed the unix connection before a whole frame arrived."""


def send_frame(sock: socket.socket, obj: Any) -> None:
    data = json.dumps(obj, separators=(",", ":")).encode()
    sock.sendall(_HEADER.pack(len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise PeerClosed(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def recv_frame(sock: socket.socket) -> Any:
    """One frame's JSON value. Raises PeerClosed on EOF, ValueError on a bad length or JSON, OSError/timeout as
    the socket does."""
    (n,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    if n > MAX_FRAME:
        raise ValueError(f"frame of {n} bytes exceeds the {MAX_FRAME}-byte limit")
    return json.loads(_recv_exact(sock, n))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"))


def encode_error(e: BaseException) -> dict[str, Any]:
    """An exception as a frame's "error": the nearest pdctl.errors class by name, else ValueError or "internal"."""
    if isinstance(e, PdctlError):
        cls = next(c for c in type(e).__mro__ if getattr(errors, c.__name__, None) is c)
        return {"type": cls.__name__, "message": e.message, "hint": e.hint, "target": getattr(e, "target", None)}
    kind = "ValueError" if isinstance(e, ValueError) else "internal"
    return {"type": kind, "message": f"{type(e).__name__}: {e}" if kind == "internal" else str(e)}


def decode_error(err: dict[str, Any], host_name: str) -> Exception:
    """The exception an "error" of a frame stands for, ready to raise on the client."""
    kind, message = str(err.get("type")), str(err.get("message"))
    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, PdctlError):
        if issubclass(cls, UnreachableError):
            return cls(message, target=err.get("target") or host_name, hint=err.get("hint"))
        return cls(message, hint=err.get("hint"))
    if kind == "ValueError":
        return ValueError(message)
    return UnreachableError(
        f"unknown: {host_name}: the SSH keeper failed: {message}",
        target=host_name,
        hint="nothing was concluded about the host; retry, or end the kept connection with "
        "`pdctl ssh --close` (its log is beside its socket)",
    )
