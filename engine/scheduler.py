"""Scheduler thread shared by all modes: inbox, aborts, prefill chunks, batched decode, metrics.
Null mode (unified) is this class as is; prefill and decode modes override `step`."""
from __future__ import annotations

import os
import queue
import threading
import time

from engine import sampling
from engine.model import TinyLM
from engine.req import Req
from engine.scheduler_stats import SchedulerStats
from engine.tokenizer import ByteTokenizer


def env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


class Scheduler:
    engine_type = "unified"

    def __init__(self, model: TinyLM, args, metrics):
        self.model, self.args, self.metrics = model, args, metrics
        self.tok = ByteTokenizer()
        self.chunk = args.chunked_prefill_size if args.chunked_prefill_size > 0 else 1 << 30
        self.max_running = args.max_running_requests or 64
        self.inbox: queue.Queue = queue.Queue()
        self.wake = threading.Event()
        self.waiting: list[Req] = []     # prefill compute queue (head may be part-way through its chunks)
        self.running: list[Req] = []     # decode batch
        self.by_rid: dict[str, Req] = {}
        self.stats = SchedulerStats(metrics, self.engine_type)
        self.thread = threading.Thread(target=self._loop, name="scheduler", daemon=True)

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
                self.stats.on_arrival(r)
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

    def _drop(self, r: Req) -> None:
        for q in (self.waiting, self.running):
            if r in q:
                q.remove(r)
        self.by_rid.pop(r.rid, None)

    def step(self) -> bool:
        did = self.prefill_one_chunk() is not None
        return self.decode_step() or did

    # -- compute ------------------------------------------------------------------------------
    def prefill_one_chunk(self):
        """Run one chunk of the head waiting request; returns (req, chunk_start, chunk_end, logits|None)."""
        if not self.waiting or len(self.running) >= self.max_running:
            return None
        r = self.waiting[0]
        if r.cache is None:
            r.cache = self.model.new_cache(len(r.input_ids) + r.max_new_tokens + 1)
        s = r.prefill_pos
        e = min(len(r.input_ids), s + self.chunk)
        self.stats.on_forward(r)
        t0 = time.monotonic()
        logits = self.model.extend(r.input_ids[s:e], r.cache)
        self.stats.on_extend(e - s, time.monotonic() - t0)
        r.prefill_pos = e
        last = e == len(r.input_ids)
        self.stats.on_chunk(r, last)
        if last:
            self.waiting.pop(0)
            self.on_prefill_done(r, logits)
        return r, s, e, (logits if last else None)

    def on_prefill_done(self, r: Req, logits) -> None:
        tok = self.model.sample(logits, r.temperature, r.top_p, r.generator())
        self.emit(r, tok, logits)
        if not r.done:
            self.running.append(r)

    def decode_step(self) -> bool:
        batch = [r for r in self.running if not r.done][: self.max_running]
        if not batch:
            return False
        t0 = time.monotonic()
        logits = self.model.decode([r.out_ids[-1] for r in batch], [r.cache for r in batch])
        self.stats.on_decode(batch, time.monotonic() - t0)
        for r, lg in zip(batch, logits):
            self.emit(r, self.model.sample(lg, r.temperature, r.top_p, r.generator()), lg)
        return True

    def emit(self, r: Req, tok: int, logits=None) -> None:
        """Append a token, stream it, finish on length / stop token / stop string. `logits` is the raw row the
        token was sampled from (its logprob); without it, the entry prefill sent along with the first token."""
        if r.first_token_at is None:
            r.first_token_at = time.monotonic()
        lp = None
        if r.return_logprob:
            lp = (sampling.entry(logits, tok, self.model.mask, r.temperature, r.top_logprobs_num)
                  if logits is not None else r.first_logprob)
        r.out_ids.append(tok)
        reason = None  # SGLang's order: length, then stop token ids (matched is the id), then stop strings
        if len(r.out_ids) >= r.max_new_tokens:
            reason = {"type": "length", "length": len(r.out_ids)}
        elif tok in r.stop_token_ids:
            reason = {"type": "stop", "matched": tok}
        elif r.stop:
            text = self.tok.decode(r.out_ids[-64:])
            reason = next(({"type": "stop", "matched": s} for s in r.stop if s and text.endswith(s)), None)
        r.sink(("tokens", [tok], [lp], reason))
        if reason:
            self.complete(r, reason)

    def complete(self, r: Req, reason: dict) -> None:
        self._drop(r)
        r.finish(reason)
