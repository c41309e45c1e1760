"""Prefill mode: bootstrap queue -> chunked prefill (a step holds chunks of several requests up to the
budget; each chunk staged in the pool and queued for transfer) -> inflight queue until the room is
Success or Failed.

Beyond upstream, a room may not sit in the inflight queue forever: after
SGLANG_DISAGGREGATION_INFLIGHT_TIMEOUT seconds (default 300) it is failed and counted -- except under
the status-update-race drill, which reproduces upstream (no such timeout)."""

from __future__ import annotations

import time

from torch import Tensor

from engine import sampling
from engine.disaggregation.kvpoll import KVPoll
from engine.disaggregation.prefill_kv import Chunk, PrefillKVManager
from engine.model import KVCache
from engine.req import Req
from engine.scheduler import Scheduler, env_float

PREFILL_DONE = {"type": "length", "length": 0}


class PrefillScheduler(Scheduler):
    engine_type = "prefill"
    decodes = False

    def __init__(self, model, args, metrics, kv: PrefillKVManager, moves_kv: bool = True):
        super().__init__(model, args, metrics)
        self.kv = kv
        # False (the fake backend, as SGLang's FakeKVSender): a request is prefilled and answered at once, nothing
        # is staged or sent, and the decode computes the prompt itself
        self.moves_kv = moves_kv
        P = kv.pool.page_size
        self.chunk = max(P, (self.chunk // P) * P)  # chunks end on page boundaries
        self.bootstrap: list[Req] = []
        self.inflight: list[Req] = []
        self.inflight_since: dict[str, float] = {}
        self.bootstrap_timeout = env_float("SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT", 300)
        self.inflight_timeout = env_float("SGLANG_DISAGGREGATION_INFLIGHT_TIMEOUT", 300)

    def admit(self, r: Req) -> None:
        if r.health:
            self.stats.on_waiting(r)
            self.waiting.insert(0, r)
            return
        if self.refused_without_bootstrap(r):
            return
        if not self.moves_kv:
            self.stats.on_waiting(r)
            self.waiting.append(r)
            return
        self.kv.status.update(r.transfer_room(), KVPoll.Bootstrapping)
        self.bootstrap.append(r)

    def on_abort(self, r: Req) -> None:
        if r.room is not None and not r.health:
            self.kv.fail_room(r.room)
        if r in self.inflight:
            # Upstream keeps the room queued until its poll reads Failed; the caller is answered now.
            self.by_rid.pop(r.rid, None)
            return
        for q in (self.bootstrap, self.waiting):
            if r in q:
                q.remove(r)
        self._release(r)
        self._drop(r)

    def _release(self, r: Req) -> None:
        if r.room is not None and not r.health and r not in self.inflight:
            self.kv.clear(r.room)

    def step(self) -> bool:
        now = time.monotonic()
        for r in list(self.bootstrap):
            room = r.transfer_room()
            st = self.kv.status.get(room)
            if self.kv.has_dest(room) and st != KVPoll.Failed:
                self.bootstrap.remove(r)
                self.stats.on_waiting(r)
                self.waiting.append(r)
                self.metrics.observe("kv_transfer_bootstrap_ms", (now - r.created) * 1000)
            elif self.kv.was_aborted(room) or st == KVPoll.Failed:
                self.bootstrap.remove(r)
                self._drop(r)
                self.kv.clear(room)
                r.fail(500, "KV transfer aborted by decode before prefill started")
            elif now - r.created > self.bootstrap_timeout:
                self.bootstrap.remove(r)
                self._drop(r)
                self.kv.status.update(room, KVPoll.Failed)
                self.kv.clear(room)
                self.metrics.inc("num_bootstrap_failed_reqs")
                r.fail(
                    500, f"bootstrap timeout after {self.bootstrap_timeout:g}s (decode never sent its KV destination)"
                )
        did = self._prefill_chunk()
        self._poll_inflight(now)
        return did

    def batch_room(self) -> int:
        return self.max_running  # nothing decodes here: finished prompts go to the inflight queue

    def _prefill_chunk(self) -> bool:
        """One batched prefill step. Every chunk of a PD request gets its staging pages first; the batch stops at
        the first chunk the pool cannot stage (the transfer worker frees pages)."""
        P = self.kv.pool.page_size
        chunks, staged = [], []
        for r, s, e in self.schedule_prefill(page=P):
            src = [] if r.health or not self.moves_kv else self.kv.pool.alloc(self.kv.pool.pages_for(e - s))
            if src is None:
                break
            chunks.append((r, s, e))
            staged.append(src)
        if not chunks:
            return False
        for done, src in zip(self.prefill_batch(chunks), staged):
            r, s, e = done.req, done.start, done.end
            if r.health or not self.moves_kv:
                continue
            self.kv.pool.write_tokens(src, done.cache.kv[:, :, s:e])
            last = done.logits is not None
            first = r.out_ids[0] if last and r.out_ids else -1
            if last:
                r.cache = None  # KV now lives in the staging pages until the transfer worker is done
            self.kv.enqueue(Chunk(r.transfer_room(), src, s // P, last, first, sampling.pack(r.first_logprob)))
        return True

    def on_prefill_done(self, r: Req, cache: KVCache, logits: Tensor) -> None:
        tok = self.model.sample(logits, r.temperature, r.top_p, r.generator())
        if r.health:
            self.emit(r, tok, logits)
            if not r.done:
                self.complete(r, {"type": "length", "length": 1})
            return
        if not self.moves_kv:
            r.cache = None
            self.by_rid.pop(r.rid, None)
            r.finish(PREFILL_DONE)
            return
        r.out_ids.append(tok)  # handed to decode with the last chunk, not streamed here
        if r.return_logprob:  # decode never sees these logits: the entry travels with the token
            r.first_logprob = sampling.entry(logits, tok, self.model.mask, r.temperature, r.top_logprobs_num)
        self.inflight.append(r)
        self.inflight_since[r.rid] = time.monotonic()

    def _poll_inflight(self, now: float) -> None:
        pin_ok = self.kv.drills.status_update_race
        for r in list(self.inflight):
            room = r.transfer_room()
            st = self.kv.status.get(room)
            if st == KVPoll.Success:
                self._leave_inflight(r)
                self.stats.on_transfer_done(r)
                r.finish(PREFILL_DONE)
            elif st == KVPoll.Failed or st is None:
                self._leave_inflight(r)
                self.metrics.inc("num_transfer_failed_reqs")
                r.fail(500, "KV transfer failed")
            elif not pin_ok and now - self.inflight_since[r.rid] > self.inflight_timeout:
                self.kv.fail_room(room)
                self._leave_inflight(r)
                self.metrics.inc("num_transfer_failed_reqs")
                r.fail(500, f"KV transfer timed out in the inflight queue after {self.inflight_timeout:g}s")

    def _leave_inflight(self, r: Req) -> None:
        self.inflight.remove(r)
        self.inflight_since.pop(r.rid, None)
        self.by_rid.pop(r.rid, None)
        self.kv.clear(r.transfer_room())
