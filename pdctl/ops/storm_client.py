"""The storm's HTTP client: streaming requests through the router, each aborted by CLIENT DISCONNECT at its time.

httpx's AsyncClient on one event loop: a request whose abort time comes is cancelled there, and the cancelled
stream closes its connection at once (it is never returned to the pool), so the router sees the disconnect at the
planned instant and cancels the request on both sides; proxies from the environment are ignored (the router is
sent to straight, as every probe is). Every request gets a connection of its own, as separate
clients would. Every request is bounded by its abort time (or by `timeout_s` when it is not aborted); connections
are always closed.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Awaitable, Callable

import httpx

from pdctl.checks.storm import RequestOutcome

#: no keep-alive and no cap: each storm request is a client of its own, closed when it ends or is aborted
STORM_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=0)
STREAM_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


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


async def _read_stream(
    client: httpx.AsyncClient, url: str, body: bytes, out: RequestOutcome, t0: float, clock: Callable[[], float]
) -> None:
    """Send and read until the server ends the stream, an error event or a non-200 answer; fills `out`."""
    async with client.stream("POST", url, content=body, headers=STREAM_HEADERS) as r:
        out.status_code = r.status_code
        if r.status_code != 200:
            out.error, out.finished_s = f"HTTP {r.status_code}", clock() - t0
            return
        tail = b""  # enough of the stream to find the first "data:" line even when it arrives split
        async for data in r.aiter_raw():
            if out.first_token_s is None:
                tail = (tail + data)[-4096:]
                if b"data:" in tail and b"\n" in tail.split(b"data:", 1)[1]:
                    event = tail.split(b"data:", 1)[1].split(b"\n", 1)[0]
                    if b'"error"' in event:
                        out.error = "stream error: " + event.decode("utf-8", "replace").strip()[:120]
                        out.finished_s = clock() - t0
                        return
                    out.first_token_s = clock() - t0
    out.finished_s = clock() - t0


async def stream_once(
    base_url: str,
    path: str,
    body: bytes,
    *,
    abort_after_s: float | None,
    timeout_s: float,
    out: RequestOutcome,
    clock: Callable[[], float] = time.monotonic,
    client: httpx.AsyncClient | None = None,
) -> RequestOutcome:
    """Send one streaming request; close the connection at `abort_after_s` after the send (None: read to the end,
    at most `timeout_s`). Fills `out` (times relative to the send) and returns it. Never raises for HTTP or
    network trouble (it lands in out.error); asyncio.CancelledError still propagates after closing. `client`: the
    run's AsyncClient (one of its own when None)."""
    t0 = clock()
    limit = abort_after_s if abort_after_s is not None else timeout_s
    own = client is None
    client = client or httpx.AsyncClient(limits=STORM_LIMITS, timeout=None, trust_env=False)
    try:
        await asyncio.wait_for(_read_stream(client, base_url.rstrip("/") + path, body, out, t0, clock), limit)
    except asyncio.TimeoutError:  # the abort time came (or the bound): the cancelled stream closed its connection
        if out.finished_s is None and out.error is None:
            if abort_after_s is not None:
                out.aborted_s = clock() - t0
            else:
                out.error = f"no end of stream within {timeout_s:g}s"
    except httpx.HTTPError as e:
        out.error = f"{type(e).__name__}: {e}"
    except asyncio.CancelledError:  # the load phase was stopped (its time bound, Ctrl-C): say so, then propagate
        if out.finished_s is None and out.aborted_s is None and out.error is None:
            out.error = f"cut after {clock() - t0:.2f}s: the load phase was stopped (time bound or Ctrl-C)"
        raise
    finally:
        if own:
            await client.aclose()
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
        await (send or stream_once)(
            base_url,
            path,
            make_body(k),
            abort_after_s=abort,
            timeout_s=timeout_s,
            out=outcomes[k],
            clock=clock,
            client=client,
        )
        if on_done:
            on_done(outcomes[k])

    async with httpx.AsyncClient(limits=STORM_LIMITS, timeout=None, trust_env=False) as client:
        await asyncio.gather(*(one(k) for k in range(len(plan))))
    return outcomes
