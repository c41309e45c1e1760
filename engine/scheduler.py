"""Scheduler thread shared by all modes: inbox, aborts, batched prefill chunks, batched decode, metrics.
Null mode (unified) is this class as is; prefill and decode modes override `step`.

A prefill step takes chunks of several waiting requests up to the chunked-prefill budget (as SGLang's
chunked prefill: the queue's heads in order, only the last one cut). The running batch lives in the
model's DecodeSlots: running[i] is slot i, a request's KV window is copied in once when it joins."""

from __future__ import annotations

import logging
import os
import queue
import threading
import time

from torch import Tensor

from typing import NamedTuple

from engine import sampling
from engine.events import Done, Event, LogprobEntry, Sink, Tokens
from engine.model import DecodeSlots, KVCache, TinyLM
from engine.req import Req
from engine.scheduler_stats import SchedulerStats
from engine.tokenizer import ByteTokenizer

log = logging.getLogger("engine.scheduler")
DECODE_LOG_INTERVAL = 40


class PrefilledChunk(NamedTuple):
    """One chunk of one prefill step: req's tokens start..end went into cache; logits once its prompt is done."""

    req: Req
    start: int
    end: int
    cache: KVCache
    logits: Tensor | None


def env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def _sent_in_chunks(sink: Sink, every: int, first_at_once: bool) -> Sink:
    """What SGLang's scheduler sends its tokenizer: a streaming request's tokens every `every` (--stream-interval,
    the first at once), a non-streaming one's every SGLANG_FORCE_STREAM_INTERVAL (50), and whatever is left when
    it ends; token events in between are joined here instead of crossing to the HTTP loop one by one."""
    ids: list[int] = []
    lps: list[LogprobEntry | None] = []
    sent = [0]

    def put(ev: Event) -> None:
        if isinstance(ev, Tokens):
            ids.extend(ev.ids)
            lps.extend(ev.logprobs)
            if ev.reason is None and len(ids) < every and not (first_at_once and sent[0] == 0):
                return
            ev = Tokens(list(ids), list(lps), ev.reason)
            sent[0] += len(ids)
        elif ids:  # what is held crosses with the end, in the same output batch: it carries the finish reason
            sink(Tokens(list(ids), list(lps), ev.reason if isinstance(ev, Done) else None))
        ids.clear()
        lps.clear()
        sink(ev)

    return put


class Scheduler:
    engine_type = "unified"
    decodes = True  # holds a running batch (DecodeSlots); the prefill server does not

    def __init__(self, model: TinyLM, args, metrics):
        self.model, self.args, self.metrics = model, args, metrics
        self.tok = ByteTokenizer()
        self.chunk = args.chunked_prefill_size if args.chunked_prefill_size > 0 else 1 << 30
        self.max_running = args.max_running_requests or 64
        self.inbox: queue.Queue = queue.Queue()
        self.wake = threading.Event()
        self.waiting: list[Req] = []  # prefill compute queue (head may be part-way through its chunks)
        self.running: list[Req] = []  # decode batch
        self.by_rid: dict[str, Req] = {}
        self.stats = SchedulerStats(metrics, self.engine_type)
        self.stream_interval = max(1, getattr(args, "stream_interval", 1) or 1)
        self.force_stream_interval = max(1, int(env_float("SGLANG_FORCE_STREAM_INTERVAL", 50)))
        self.slots: DecodeSlots | None = model.new_slots(self.max_running) if self.decodes else None
        self.decode_steps = 0
        self.thread = threading.Thread(target=self._loop, name="scheduler", daemon=True)

    @property
    def batch_slots(self) -> DecodeSlots:
        """The running batch's KV; only a scheduler that decodes holds one."""
        if self.slots is None:
            raise RuntimeError(f"the {self.engine_type} scheduler holds no running batch")
        return self.slots

    # -- API used by the HTTP layer (any thread) -----------------------------------------------
    def submit(self, req: Req) -> None:
        self.inbox.put(("req", req))
        self.wake.set()

    def abort(self, rid: str | None, abort_all: bool = False) -> None:
        self.inbox.put(("abort", rid, abort_all))
        self.wake.set()

    def num_active(self) -> int:
        return len(self.by_rid)

    def start(self) -> None:
        self.thread.start()

    # -- loop ---------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            self._drain_inbox()
            try:
                busy = self.step()
            except Exception as e:  # a bug in one step must not wedge the server silently
                import traceback

                traceback.print_exc()
                for r in list(self.by_rid.values()):
                    self._drop(r)
                    r.fail(500, f"internal error: {e}")
                busy = False
            self.stats.tick(self, busy)
            if not busy:
                self.wake.wait(0.005)
                self.wake.clear()

    def _drain_inbox(self) -> None:
        while True:
            try:
                msg = self.inbox.get_nowait()
            except queue.Empty:
                return
            if msg[0] == "req":
                r = msg[1]
                r.t_queue = time.monotonic()
                self.by_rid[r.rid] = r
                self.stats.on_arrival(r)  # the metrics see what SGLang's tokenizer sees: the chunks below
                every = self.stream_interval if r.stream else self.force_stream_interval
                if every > 1:
                    r.sink = _sent_in_chunks(r.sink, every, first_at_once=r.stream)
                self.admit(r)
            else:
                _, rid, abort_all = msg
                targets = list(self.by_rid.values()) if abort_all else [self.by_rid[rid]] if rid in self.by_rid else []
                for r in targets:
                    self.stats.on_abort(r)
                    self.on_abort(r)
                    # As SGLang: the caller gets its answer so far with finish_reason abort (HTTP 200), which a
                    # router does not retry; a 5xx would be retried and the abort silently undone.
                    r.finish({"type": "abort", "message": "Abort requested"})

    def admit(self, r: Req) -> None:
        self.stats.on_waiting(r)
        self.waiting.append(r)

    def on_abort(self, r: Req) -> None:
        self._drop(r)

    def refused_without_bootstrap(self, r: Req) -> bool:
        """A PD scheduler's guard at admission: a request for the transfer path without its bootstrap room, host
        and port fails at once (request_parse already answers 400 before one gets here)."""
        if r.room is not None and r.bootstrap_host is not None and r.bootstrap_port is not None:
            return False
        self._drop(r)
        r.fail(400, "bootstrap_host, bootstrap_port and bootstrap_room are required in disaggregation mode")
        return True

    def _drop(self, r: Req) -> None:
        if r in self.waiting:
            self.waiting.remove(r)
        if r in self.running:
            self._leave_batch(r)
        self.by_rid.pop(r.rid, None)

    def _leave_batch(self, r: Req) -> None:
        i = self.running.index(r)
        self.batch_slots.leave(i)  # the last slot moves into i: so does the last request
        last = self.running.pop()
        if last is not r:
            self.running[i] = last

    def join_batch(self, r: Req, kv: Tensor, length: int) -> None:
        """Start decoding r: kv[layer, k/v, pos, d] ends at position length - 1 and holds at least its last window
        (or all of it when shorter); that window is copied into the next slot."""
        m = min(length, self.model.cfg.window)
        self.batch_slots.join(kv[:, :, kv.shape[2] - m :], length)
        self.running.append(r)

    def step(self) -> bool:
        did = bool(self.prefill_batch())
        return self.decode_step() or did

    # -- compute ------------------------------------------------------------------------------
    def batch_room(self) -> int:
        """How many more requests may start prefill: each takes a decode slot when done."""
        return self.max_running - len(self.running)

    def schedule_prefill(self, page: int = 1) -> list[tuple[Req, int, int]]:
        """Chunks for one prefill step, (req, start, end): the waiting queue's heads in order up to the chunk budget;
        only the last may be cut, at a multiple of `page`. No more requests than the running batch has room for."""
        budget, out = self.chunk, []
        for r in self.waiting[: max(0, self.batch_room())]:
            s = r.prefill_pos
            rest = len(r.input_ids) - s
            n = rest if rest <= budget else budget - budget % page
            if n <= 0:
                break
            out.append((r, s, s + n))
            budget -= n
        return out

    def prefill_batch(self, chunks: list[tuple[Req, int, int]] | None = None) -> list[PrefilledChunk]:
        """Run one prefill step, one PrefilledChunk per chunk (the cache is also the request's until its prompt is
        done)."""
        chunks = self.schedule_prefill() if chunks is None else chunks
        if not chunks:
            return []
        caches: list[KVCache] = []
        for r, _, _ in chunks:
            if r.cache is None:
                r.cache = self.model.new_cache(len(r.input_ids))
            caches.append(r.cache)
        for r, _, _ in chunks:
            self.stats.on_forward(r)
        t0 = time.monotonic()
        logits = self.model.extend_batch([(r.input_ids[s:e], c) for (r, s, e), c in zip(chunks, caches)])
        self.stats.on_extend(sum(e - s for _, s, e in chunks), time.monotonic() - t0)
        # SGLang's per-batch log line (its field names), which tests and operators read
        log.info(
            "Prefill batch, #new-seq: %d, #new-token: %d, #running-req: %d, #queue-req: %d",
            len(chunks),
            sum(e - s for _, s, e in chunks),
            len(self.running),
            len(self.waiting),
        )
        out: list[PrefilledChunk] = []
        for (r, s, e), c, lg in zip(chunks, caches, logits):
            r.prefill_pos = e
            last = e == len(r.input_ids)
            self.stats.on_chunk(r, last)
            if last:
                self.waiting.remove(r)
                self.on_prefill_done(r, c, lg)
            out.append(PrefilledChunk(r, s, e, c, lg if last else None))
        return out

    def on_prefill_done(self, r: Req, cache: KVCache, logits: Tensor) -> None:
        tok = self.model.sample(logits, r.temperature, r.top_p, r.generator())
        self.emit(r, tok, logits)
        if not r.done:
            self.join_batch(r, cache.kv, len(r.input_ids))
        r.cache = None  # the dense prompt cache is no longer needed: decode runs in the slot

    def decode_step(self) -> bool:
        for r in [r for r in self.running if r.done]:  # finished elsewhere: never decode a stale slot
            self._leave_batch(r)
        if not self.running:
            return False
        batch = list(self.running)
        self.decode_steps += 1
        if self.decode_steps % DECODE_LOG_INTERVAL == 0:  # SGLang's decode log line, at its default interval
            log.info(
                "Decode batch, #running-req: %d, #token: %d, gen throughput (token/s): %.2f, #queue-req: %d",
                len(batch),
                int(self.batch_slots.pos[: len(batch)].sum()),
                self.stats.gen_throughput(time.monotonic()),
                len(self.waiting),
            )
        t0 = time.monotonic()
        logits = self.model.decode([r.out_ids[-1] for r in batch], self.batch_slots)
        self.stats.on_decode(batch, time.monotonic() - t0)
        toks = self.model.sample_batch(logits, batch)
        for i, r in enumerate(batch):  # a row of logits only for a request that reads its logprob
            self.emit(r, toks[i], logits[i] if r.return_logprob else None)
        return True

    def emit(self, r: Req, tok: int, logits: Tensor | None = None) -> None:
        """Append a token, stream it, finish on length / stop token / stop string. `logits` is the raw row the
        token was sampled from (its logprob); without it, the entry prefill sent along with the first token."""
        if r.first_token_at is None:
            r.first_token_at = time.monotonic()
        lp = None
        if r.return_logprob:
            lp = (
                sampling.entry(logits, tok, self.model.mask, r.temperature, r.top_logprobs_num)
                if logits is not None
                else r.first_logprob
            )
        r.out_ids.append(tok)
        reason: dict[str, object] | None = (
            None  # SGLang's order: length, then stop token ids (matched is the id), then stop strings
        )
        if len(r.out_ids) >= r.max_new_tokens:
            reason = {"type": "length", "length": len(r.out_ids)}
        elif tok in r.stop_token_ids:
            reason = {"type": "stop", "matched": tok}
        elif r.stop:
            text = self.tok.decode(r.out_ids[-64:])
            matched = next((s for s in r.stop if s and text.endswith(s)), None)
            reason = {"type": "stop", "matched": matched} if matched else None
        r.sink(Tokens([tok], [lp], reason))
        if reason:
            self.complete(r, reason)

    def complete(self, r: Req, reason: dict) -> None:
        self._drop(r)
        r.finish(reason)
