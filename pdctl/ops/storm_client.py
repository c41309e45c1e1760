"""The storm's HTTP client: streaming requests through the router, each aborted by CLIENT DISCONNECT at its time.

Raw asyncio streams rather than an HTTP library: closing a blocking socket from another thread does not send the FIN
until the reader wakes, which would smear the abort time by seconds. Here the abort is `transport.abort()` on the
event loop at the planned instant, so the router sees the disconnect then and cancels the request on both sides.
Every request is bounded by its abort time (or by `timeout_s` when it is not aborted); connections are always closed.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Awaitable, Callable
from urllib.parse import urlsplit

from pdctl.checks.storm import RequestOutcome


def generate_body(input_ids: list[int], max_new_tokens: int, path: str) -> bytes:
    if path == "/generate":
        body = {
            "input_ids": input_ids,
            "stream": True,
            "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0},
        }
    else:  # chat: the ids as text (printable ASCII), about one token per character on a byte vocabulary
        body = {
            "messages": [{"role": "user", "content": "".join(chr(i) for i in input_ids)}],
            "max_tokens": max_new_tokens,
            "temperature": 0,
            "stream": True,
        }
    return json.dumps(body, separators=(",", ":")).encode()


def _request_bytes(host: str, port: int, path: str, body: bytes) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


async def stream_once(
    base_url: str,
    path: str,
    body: bytes,
    *,
    abort_after_s: float | None,
    timeout_s: float,
    out: RequestOutcome,
    clock: Callable[[], float] = time.monotonic,
) -> RequestOutcome:
    """Send one streaming request; close the connection at `abort_after_s` after the send (None: read to the end,
    at most `timeout_s`). Fills `out` (times relative to the send) and returns it. Never raises for HTTP or
    network trouble (it lands in out.error); asyncio.CancelledError still propagates after closing."""
    u = urlsplit(base_url)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    t0 = clock()
    limit = abort_after_s if abort_after_s is not None else timeout_s
    writer = None
    buf = b""
    header_done = False
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout=max(0.05, limit))
        writer.write(_request_bytes(host, port, path, body))
        await writer.drain()
        while True:
            left = limit - (clock() - t0)
            if left <= 0:
                break
            try:
                data = await asyncio.wait_for(reader.read(65536), timeout=left)
            except asyncio.TimeoutError:
                break
            if not data:
                out.finished_s = clock() - t0
                break
            buf += data
            if not header_done and b"\r\n\r\n" in buf:
                header_done = True
                status_line = buf.split(b"\r\n", 1)[0].decode("latin-1")
                try:
                    out.status_code = int(status_line.split()[1])
                except (IndexError, ValueError):
                    out.error = f"bad status line {status_line[:60]!r}"
                    break
                if out.status_code != 200:
                    out.error = f"HTTP {out.status_code}"
                    out.finished_s = clock() - t0
                    break
                buf = buf.split(b"\r\n\r\n", 1)[1]
            if header_done and out.first_token_s is None and b"data:" in buf:
                event = buf.split(b"data:", 1)[1].split(b"\n", 1)[0]
                if b'"error"' in event:
                    out.error = "stream error: " + event.decode("utf-8", "replace").strip()[:120]
                    out.finished_s = clock() - t0
                    break
                out.first_token_s = clock() - t0
            if header_done:
                buf = buf[-256:]  # keep a tail for a split "data:" only
        if out.finished_s is None and out.error is None:
            if abort_after_s is not None:
                out.aborted_s = clock() - t0
            else:
                out.error = f"no end of stream within {timeout_s:g}s"
    except asyncio.TimeoutError:
        out.error = f"connect timed out after {limit:g}s"
    except OSError as e:
        out.error = f"{type(e).__name__}: {e}"
    except asyncio.CancelledError:  # the load phase was stopped (its time bound, Ctrl-C): say so, then propagate
        if out.finished_s is None and out.aborted_s is None and out.error is None:
            out.error = f"cut after {clock() - t0:.2f}s: the load phase was stopped (time bound or Ctrl-C)"
        raise
    finally:
        if writer is not None:
            writer.transport.abort()  # the client disconnect: immediate, no graceful wait
    return out


async def run_requests(
    base_url: str,
    path: str,
    plan: list[tuple[float, float | None]],
    make_body: Callable[[int], bytes],
    *,
    timeout_s: float,
    on_done: Callable[[RequestOutcome], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    outcomes: list[RequestOutcome] | None = None,
    send: Callable[..., Awaitable[RequestOutcome]] | None = None,
) -> list[RequestOutcome]:
    """Launch request k at plan[k][0] seconds after the start, aborted plan[k][1] s after its send (None = not
    aborted). All in one event loop; bounded by the last launch plus its abort (or timeout).

    `outcomes` (optional): the caller's list, filled in place with one RequestOutcome per plan entry before any
    request is sent, so that what finished survives a cancellation of this coroutine (the storm's time bound,
    Ctrl-C); a request cut or never sent by the cancellation gets an `error` saying so. `send` replaces
    `stream_once` (same signature; for tests). Returns the outcomes list."""
    send = send or stream_once
    start = clock()
    if outcomes is None:
        outcomes = []
    outcomes[:] = [
        RequestOutcome(k, launch, abort if abort is not None else -1.0) for k, (launch, abort) in enumerate(plan)
    ]

    async def one(k: int) -> None:
        launch, abort = plan[k]
        delay = launch - (clock() - start)
        try:
            if delay > 0:
                await asyncio.sleep(delay)
        except asyncio.CancelledError:
            outcomes[k].error = "not sent: the load phase was stopped first (time bound or Ctrl-C)"
            raise
        outcomes[k].launch_at = clock() - start
        await send(base_url, path, make_body(k), abort_after_s=abort, timeout_s=timeout_s, out=outcomes[k], clock=clock)
        if on_done:
            on_done(outcomes[k])

    await asyncio.gather(*(one(k) for k in range(len(plan))))
    return outcomes
