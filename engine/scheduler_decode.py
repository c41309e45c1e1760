"""Decode mode: prealloc queue (pages reserved, destination sent to prefill) -> transfer queue
(until Success with the first token, or Failed / SGLANG_DISAGGREGATION_WAITING_TIMEOUT) -> running
batch that continues from the transferred KV."""
from __future__ import annotations

import time

from engine import sampling
from engine.disaggregation.kvpoll import KVPoll
from engine.model import KVCache
from engine.req import Req
from engine.scheduler import Scheduler, env_float


class DecodeScheduler(Scheduler):
    engine_type = "decode"

    def __init__(self, model, args, metrics, kv, fake: bool):
        super().__init__(model, args, metrics)
        self.kv, self.fake = kv, fake
        self.prealloc: list[Req] = []
        self.transfer: list[Req] = []
        self.waiting_since: dict[str, float] = {}
        self.waiting_timeout = env_float("SGLANG_DISAGGREGATION_WAITING_TIMEOUT", 300)

    def admit(self, r: Req) -> None:
        if r.health or self.fake:
            self.stats.on_waiting(r)
            self.waiting.append(r)  # local prefill: never the transfer path
        else:
            self.stats.on_prealloc(r)
            self.prealloc.append(r)

    def on_abort(self, r: Req) -> None:
        if r in self.prealloc or r in self.transfer:
            self.kv.abort_room(r.room)
            self._forget(r, quarantine=True)
        self._drop(r)

    def _forget(self, r: Req, quarantine: bool) -> None:
        for q in (self.prealloc, self.transfer):
            if r in q:
                q.remove(r)
        self.kv.pool.free(r.pages, quarantine=quarantine)
        r.pages = []
        self.waiting_since.pop(r.rid, None)
        if r.room is not None:
            self.kv.clear(r.room)

    def step(self) -> bool:
        now = time.monotonic()
        self.kv.poll()
        for r in list(self.prealloc):
            if not r.pages:
                if len(self.running) + len(self.transfer) >= self.max_running:
                    break
                pages = self.kv.pool.alloc(self.kv.pool.pages_for(len(r.input_ids)))
                if pages is None:
                    break  # KV pool full: wait for running requests to finish
                r.pages = pages
                self.stats.on_alloc(r)
                self.kv.start_room(r.room, r.bootstrap_host, r.bootstrap_port, pages)
            st = self.kv.status.get(r.room)
            if st in (KVPoll.WaitingForInput, KVPoll.Success):
                self.prealloc.remove(r)
                self.transfer.append(r)
                self.stats.on_transfer_queue(r)
                self.waiting_since[r.rid] = now
            elif st == KVPoll.Failed:
                self._forget(r, quarantine=True)
                self._drop(r)
                r.fail(500, "KV bootstrap failed (prefill unreachable or aborted)")
        for r in list(self.transfer):
            st = self.kv.status.get(r.room)
            if st == KVPoll.Success:
                first = self.kv.first_token.get(r.room, -1)
                r.first_logprob = sampling.unpack(self.kv.first_logprob.get(r.room, ""))
                kv = self.kv.pool.read_tokens(r.pages, len(r.input_ids))
                r.cache = KVCache.from_tensor(kv, len(r.input_ids), len(r.input_ids) + r.max_new_tokens + 1)
                self._forget(r, quarantine=False)
                self.stats.on_transferred(r)
                self.emit(r, first)
                if not r.done:
                    self.running.append(r)
            elif st == KVPoll.Failed or st is None:
                self._forget(r, quarantine=True)
                self._drop(r)
                self.metrics.inc("num_transfer_failed_reqs")
                r.fail(500, "KV transfer failed")
            elif now - self.waiting_since[r.rid] > self.waiting_timeout:
                self.kv.abort_room(r.room)
                self._forget(r, quarantine=True)
                self._drop(r)
                self.metrics.inc("num_transfer_failed_reqs")
                r.fail(500, f"KV transfer timed out after {self.waiting_timeout:g}s waiting for prefill")
        did = self.prefill_one_chunk() is not None
        return self.decode_step() or did

    def on_prefill_done(self, r: Req, logits) -> None:
        super().on_prefill_done(r, logits)
