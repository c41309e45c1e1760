"""Decode mode: prealloc queue (pages reserved, destination sent to prefill) -> transfer queue
(until Success with the first token, or Failed / SGLANG_DISAGGREGATION_WAITING_TIMEOUT) -> running
batch that continues from the transferred KV (only its last window is read out of the pages, into a slot)."""

from __future__ import annotations

import time

from typing import TYPE_CHECKING

from torch import Tensor

from engine import sampling
from engine.disaggregation.kvpoll import KVPoll
from engine.req import Req
from engine.scheduler import Scheduler, env_float, log
from engine.scheduler_stats import env_bool

if TYPE_CHECKING:
    from engine.disaggregation.decode_kv import DecodeKVManager


class DecodeScheduler(Scheduler):
    engine_type = "decode"

    def __init__(self, model, args, metrics, kv: DecodeKVManager, moves_kv: bool):
        super().__init__(model, args, metrics)
        self.kv = kv
        self.moves_kv = moves_kv  # False (the fake backend): nothing arrives, the decode prefills the prompt itself
        self.prealloc: list[Req] = []
        self.transfer: list[Req] = []
        self.waiting_since: dict[str, float] = {}
        self.waiting_timeout = env_float("SGLANG_DISAGGREGATION_WAITING_TIMEOUT", 300)
        # the overlap-corruption drill, under SGLang's switch (on by default there too)
        drills = getattr(args, "drills", None)
        self.corrupt_from_batch = (
            drills.overlap_corruption_batch
            if drills is not None and env_bool("SGLANG_OPT_USE_MULTI_STREAM_OVERLAP", True)
            else 0
        )

    def admit(self, r: Req) -> None:
        if r.health or not self.moves_kv:
            self.stats.on_waiting(r)
            self.waiting.append(r)  # local prefill: never the transfer path
        elif not self.refused_without_bootstrap(r):
            self.stats.on_prealloc(r)
            self.prealloc.append(r)

    def on_abort(self, r: Req) -> None:
        if r in self.prealloc or r in self.transfer:
            self.kv.abort_room(r.transfer_room())
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
            room = r.transfer_room()
            if not r.pages:
                if len(self.running) + len(self.transfer) >= self.max_running:
                    break
                pages = self.kv.pool.alloc(self.kv.pool.pages_for(len(r.input_ids)))
                if pages is None:
                    break  # KV pool full: wait for running requests to finish
                r.pages = pages
                self.stats.on_alloc(r)
                self.kv.start_room(room, *r.bootstrap_addr(), pages)
            st = self.kv.status.get(room)
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
            room = r.transfer_room()
            st = self.kv.status.get(room)
            if st == KVPoll.Success:
                first = self.kv.first_token.get(room, -1)
                r.first_logprob = sampling.unpack(self.kv.first_logprob.get(room, ""))
                n = len(r.input_ids)
                tail = self._read_window(r.pages, n)
                self._forget(r, quarantine=False)
                self.stats.on_transferred(r)
                self.emit(r, first)
                if not r.done:
                    self.join_batch(r, tail, n)
            elif st == KVPoll.Failed or st is None:
                self._forget(r, quarantine=True)
                self._drop(r)
                self.metrics.inc("num_transfer_failed_reqs")
                r.fail(500, "KV transfer failed")
            elif now - self.waiting_since[r.rid] > self.waiting_timeout:
                self.kv.abort_room(room)
                self._forget(r, quarantine=True)
                self._drop(r)
                self.metrics.inc("num_transfer_failed_reqs")
                r.fail(500, f"KV transfer timed out after {self.waiting_timeout:g}s waiting for prefill")
        did = bool(self.prefill_batch())  # the local path: health checks and the fake transport
        return self.decode_step() or did

    def join_batch(self, r: Req, kv: Tensor, length: int) -> None:
        if self.corrupt_from_batch and len(self.running) + 1 >= self.corrupt_from_batch:
            kv = kv.flip(-1)  # the drill: this request's rows scrambled, its answer still a 200
            log.warning(
                "drill overlap-corruption: %s joined a batch of %d: its KV rows scrambled", r.rid, len(self.running) + 1
            )
        super().join_batch(r, kv, length)

    def batch_room(self) -> int:
        return self.max_running - len(self.running) - len(self.transfer)  # a transfer holds a slot-to-be

    def _read_window(self, pages: list[int], n: int):
        """kv[layer, k/v, pos, d] of the pages that hold the prompt's last window, ending at position n - 1."""
        P = self.kv.pool.page_size
        first = max(0, n - self.model.cfg.window) // P
        return self.kv.pool.read_tokens(pages[first:], n - first * P)
