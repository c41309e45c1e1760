"""What /generate and /v1/* share: one request body -> several Reqs (a batch, n choices), their events
merged on one queue, each item's output (ids, logprob entries, finish reason) and its text as SGLang's
detokenizer shapes it: the matched stop string (or stop token) trimmed unless no_stop_trim."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

from fastapi import Request

from engine import request_parse as rp
from engine.events import Done, Event, Failed, LogprobEntry, Sink, Tokens, ends
from engine.req import Req
from engine.tokenizer import ByteTokenizer

DISCONNECT_CHECK_S = 0.25
# one body's events merged: (the item's index, its event)
EventQueue = asyncio.Queue[tuple[int, Event]]
tok = ByteTokenizer()


class Out:
    """One item's output so far, built from its own events (never read from the Req the scheduler mutates)."""

    def __init__(self, req: Req, no_stop_trim: bool):
        self.req, self.no_stop_trim = req, no_stop_trim
        self.ids: list[int] = []
        self.lps: list[LogprobEntry | None] = []
        self.reason: dict | None = None  # set by the done event
        self.ending = False  # the last tokens event carried a reason: its done follows
        self.sent_chars = self.sent_tokens = 0

    def add(self, ev: Tokens) -> None:
        self.ids += ev.ids
        self.lps += ev.logprobs
        self.ending = ev.reason is not None

    def text(self) -> str:
        """Final text once finished; while streaming, what is safe to send (a tail that may begin a stop string
        is held back, so the streamed text adds up to the final one)."""
        m = (self.reason or {}).get("matched") if not self.no_stop_trim else None
        if isinstance(m, int) and self.ids and self.ids[-1] == m:
            return tok.decode(self.ids[:-1])
        t = tok.decode(self.ids)
        if isinstance(m, str):
            pos = t.find(m)
            return t[:pos] if pos != -1 else t
        if self.reason is None and not self.no_stop_trim:
            hold = max((k for s in self.req.stop for k in range(1, len(s)) if t.endswith(s[:k])), default=0)
            return t[: len(t) - hold]
        return t

    def delta(self) -> tuple[str, list[LogprobEntry | None]]:
        """Text and logprob entries not sent yet."""
        t = self.text()
        d, self.sent_chars = t[self.sent_chars :], max(self.sent_chars, len(t))
        lps, self.sent_tokens = self.lps[self.sent_tokens :], len(self.lps)
        return d, lps


def _put_all(q: EventQueue, items: list[tuple[int, Event]]) -> None:
    for it in items:
        q.put_nowait(it)


def streaming_sink(loop: asyncio.AbstractEventLoop, q: EventQueue, k: int) -> Sink:
    """A streaming item's sink: each event crosses to the HTTP loop as it comes."""

    def sink(ev: Event) -> None:
        loop.call_soon_threadsafe(q.put_nowait, (k, ev))

    return sink


def _held_sink(loop: asyncio.AbstractEventLoop, q: EventQueue, k: int) -> Sink:
    """A non-streaming item's sink: nothing of it is answered before its end, so its events wait here and cross
    to the HTTP loop together once it is done or failed: one wake-up of the loop per item instead of one per
    chunk of tokens (each call_soon_threadsafe writes to the loop's self-pipe). Same events, same order; the
    metrics watch them upstream, in the scheduler process."""
    held: list[tuple[int, Event]] = []

    def sink(ev: Event) -> None:
        held.append((k, ev))
        if ends(ev):
            items = held[:]
            held.clear()
            loop.call_soon_threadsafe(_put_all, q, items)

    return sink


class Api:
    def __init__(self, state):
        self.state, self.args = state, state.args
        self.mode = state.args.disaggregation_mode

    def not_ready(self):
        return None if self.state.ready else rp.err(503, "server is starting", "ServiceUnavailable")

    async def body_of(self, request: Request) -> dict:
        try:
            b = await request.json()
        except Exception:
            raise rp.BadRequest("request body is not valid JSON")
        if not isinstance(b, dict):
            raise rp.BadRequest("request body must be a JSON object")
        return b

    def build(
        self,
        b: dict,
        prompts: list[list[int]],
        n: int,
        max_new,
        sk: dict,
        logprob=(False, 0),
        no_stop_trim: bool = False,
    ) -> tuple[EventQueue, list[Out]]:
        """-> (queue, [Out]) with one Req per (prompt, choice); nothing is submitted yet."""
        kws = rp.items(
            b,
            prompts,
            n,
            max_new,
            sk,
            mode=self.mode,
            context_length=self.state.context_length,
            default_port=self.args.disaggregation_bootstrap_port,
            logprob=logprob,
        )
        loop = asyncio.get_running_loop()
        q: EventQueue = asyncio.Queue()
        stream = bool(b.get("stream", False))  # SGLang's is_streaming label

        def sink_of(k: int) -> Sink:
            return streaming_sink(loop, q, k) if stream else _held_sink(loop, q, k)

        return q, [Out(Req(sink=sink_of(k), stream=stream, **kw), no_stop_trim) for k, kw in enumerate(kws)]

    async def run(self, request: Request, outs: list[Out], q: EventQueue) -> AsyncIterator[tuple[int, Event]]:
        """Submit every item; yield (k, event) until each is done or failed. Every item is aborted in the
        scheduler (as /abort_request does) once the client has gone or the consumer stops early. The
        disconnect check runs every DISCONNECT_CHECK_S whether or not tokens flow."""
        sched = self.state.scheduler
        for o in outs:
            sched.submit(o.req)
        left = set(range(len(outs)))
        next_check = time.monotonic() + DISCONNECT_CHECK_S
        try:
            while left:
                item: tuple[int, Event] | None
                try:
                    item = q.get_nowait()  # events that arrived together need no task and timer each
                except asyncio.QueueEmpty:
                    try:
                        item = await asyncio.wait_for(q.get(), timeout=DISCONNECT_CHECK_S)
                    except asyncio.TimeoutError:
                        item = None
                if time.monotonic() >= next_check or item is None:
                    next_check = time.monotonic() + DISCONNECT_CHECK_S
                    if await request.is_disconnected():
                        return
                if item is None:
                    continue
                k, ev = item
                o = outs[k]
                if isinstance(ev, Tokens):
                    o.add(ev)
                else:
                    if isinstance(ev, Done):
                        o.reason = ev.reason
                    left.discard(k)
                yield k, ev
        finally:
            for k in left:  # cancelled, disconnected or abandoned: nothing may keep generating
                sched.abort(outs[k].req.rid)

    async def collect(self, request: Request, outs: list[Out], q: EventQueue, native: bool = False):
        """Run to the end; None when all finished, else the error response (native: /generate's shape)."""

        def err(code: int, msg: str, typ: str):
            return rp.generate_err(code, msg) if native else rp.err(code, msg, typ)

        async for _k, ev in self.run(request, outs, q):
            if isinstance(ev, Failed):
                code = ev.code if ev.code != 499 else 500
                return err(code, ev.message, "InternalServerError" if code >= 500 else "Aborted")
        if any(o.reason is None for o in outs):
            return err(500, "request aborted", "Aborted")
        return None


def sse(obj) -> str:
    return f"data: {json.dumps(obj)}\n\n"


def sse_error(ev: Failed) -> str:
    return sse({"error": {"message": ev.message, "code": ev.code}})
