"""What feeds the metrics: one-line hooks the schedulers call at a request's milestones, plus a per-loop tick
for the gauges. The logic lives here so the schedulers stay about scheduling.

Where SGLang 0.5.23 observes a value, the engine observes it at the same milestone:
- tokenizer side (the request's output stream, wrapped at arrival; each event that crosses is one output batch as
  SGLang's tokenizer manager receives them): TTFT at the first output batch, unless that batch already ends the
  request with an abort (a non-streaming request on a unified server takes the scheduler's first-token time, as
  SGLang takes its prefill-finished time); never on a prefill worker, which observes neither TTFT nor ITL nor TPOT
  (SGLang 0.5.23's tokenizer manager skips them in PD prefill mode); inter-token latency per later batch; at the
  end prompt/generation tokens, requests, e2e latency, TPOT (only when the decode period, first token to the
  finishing batch, is longer than zero, so not for a request answered in one batch), the length histograms;
- scheduler side: queue time from the waiting queue to the first forward, the per-stage latencies SGLang
  observes (metric_families.STAGES), tokens per forward category, the KV pool and PD queue gauges, idle time and
  process CPU time; forward execution time only with SGLANG_ENABLE_METRICS_DEVICE_TIMER, as SGLang.
It also keeps what /v1/loads reports beyond the gauges (engine/loads.py): cumulative prefill tokens and busy time,
and the decode step moments.
"""

from __future__ import annotations

import os
import time
from collections import deque

from prometheus_client import Counter, Histogram

from engine.events import Done, Event, Sink, Tokens
from engine.req import Req

_WINDOW_S = 5.0
GAUGE_INTERVAL_S = 0.02  # a busy loop refreshes its gauges at most this often (a scrape reads them in seconds)
GB = float(1 << 30)


def env_bool(name: str, default: bool = False) -> bool:
    """An SGLang EnvBool: true/1/yes/y or false/0/no/n (any case); anything else is the default."""
    v = os.environ.get(name, "").strip().lower()
    return True if v in ("true", "1", "yes", "y") else False if v in ("false", "0", "no", "n") else default


class _T:
    """A request's milestones (time.monotonic seconds, as Req.created)."""

    __slots__ = (
        "wait",
        "fwd",
        "last_chunk",
        "prefill_done",
        "prealloc",
        "transfer",
        "first",
        "last",
        "n_out",
        "chunks",
        "final",
    )

    def __init__(self) -> None:
        self.wait: float | None = None
        self.fwd: float | None = None
        self.last_chunk: float | None = None
        self.prefill_done: float | None = None
        self.prealloc: float | None = None
        self.transfer: float | None = None
        self.first: float | None = None
        self.last: float | None = None  # set with first, at every output batch
        self.n_out = self.chunks = 0
        self.final = False  # the last output batch carried the finish reason: the end arrives with it


def _is_streaming(r) -> str:
    return "true" if getattr(r, "stream", False) else "false"


class TokenWindow:
    """Tokens of the last `span` seconds in 0.1 s buckets: append is O(1), the rate O(buckets), whatever the rate."""

    def __init__(self, span: float = _WINDOW_S):
        self.span = span
        self.buckets: deque[list] = deque()  # [bucket start, tokens]

    def append(self, t: float, n: int) -> None:
        b = t - t % 0.1
        if self.buckets and self.buckets[-1][0] == b:
            self.buckets[-1][1] += n
        else:
            self.buckets.append([b, n])

    def rate(self, now: float) -> float:
        while self.buckets and now - self.buckets[0][0] >= self.span:
            self.buckets.popleft()
        return sum(n for _, n in self.buckets) / self.span


class SchedulerStats:
    def __init__(self, metrics, mode: str):
        self.m, self.mode = metrics, mode
        self._times: dict[int, _T] = {}
        self._tokens = TokenWindow()
        self._gauges_at = 0.0
        # the per-token path observes this child directly (a labelled lookup per token costs a busy batch ~10%),
        # looked up at the first observation: a series exists from its first feed, never before
        self._itl: Histogram | None = None
        # forward execution time: SGLang counts it only with its device timer on (off by default)
        self.device_timer = env_bool("SGLANG_ENABLE_METRICS_DEVICE_TIMER")
        # per-step series, looked up once: the first decode creates the labelled ones (a series appears when first
        # fed); the process CPU counter is one SGLang creates at start-up (metrics.PRECREATED)
        self._decode_children: tuple[Counter | None, Counter | None] | None = None
        # what /v1/loads reports besides the gauges (SGLang's scheduler keeps the same totals)
        self.total_prefill_uncached_tokens = 0
        self.total_prefill_busy_us = 0
        self.decode_moments = [0.0] * 6  # steps, sum of batch sizes, of step us, of sizes^2, of size*us, generated
        self._cpu_child = (
            metrics.counter("scheduler_process_cpu_seconds_total")
            if metrics.has("scheduler_process_cpu_seconds_total")
            else None
        )
        self._last_tick = time.monotonic()
        self._was_idle = False
        self._cpu = time.process_time()

    def _t(self, r) -> _T:
        # A request seen after its end (e.g. an aborted room leaving the inflight queue) gets a throwaway record.
        return self._times.get(id(r)) or _T()

    def _stage(self, stage: str, seconds: float) -> None:
        self.m.observe("per_stage_req_latency_seconds", max(0.0, seconds), stage=stage)

    # -- tokenizer side -------------------------------------------------------------------------
    def on_arrival(self, r) -> None:
        """The scheduler took `r` from its inbox: watch its output stream (what SGLang's tokenizer sees). A health
        check's is not watched: SGLang sends it with log_metrics=False (its warm-up generation is counted)."""
        if r.rid.startswith("HEALTH_CHECK_"):
            return  # (nor kept in _times, which only a watched stream's end clears)
        self._times[id(r)] = _T()
        sink = r.sink

        def watched(ev: Event, _sink: Sink = sink, _r: Req = r) -> None:
            try:
                self._on_output(_r, ev)
            finally:
                _sink(ev)

        r.sink = watched

    def _on_output(self, r: Req, ev: Event) -> None:
        now = time.monotonic()
        t = self._t(r)
        if isinstance(ev, Tokens):
            n = len(ev.ids)
            self._tokens.append(now, n)
            ends = ev.reason
            if t.first is None:
                # SGLang's first_token_time: the first output batch; for a non-streaming request the scheduler's
                # prefill-finished time where it has one (a unified server; a decode worker prefills nothing)
                t.first = now if r.stream or self.mode != "null" else (getattr(r, "first_token_at", None) or now)
                aborted = isinstance(ends, dict) and ends.get("type") == "abort"
                if self.mode != "prefill" and not aborted:
                    self.m.observe("time_to_first_token_seconds", t.first - _created(r), is_streaming=_is_streaming(r))
            elif n and self.m.has("inter_token_latency_seconds"):
                if self._itl is None:
                    self._itl = self.m.histogram("inter_token_latency_seconds")
                gap = now - (t.last if t.last is not None else now)
                for _ in range(n):
                    self._itl.observe(gap / n)
            t.last = now
            t.n_out += n
            t.final = ends is not None
            return
        reason = ev.reason.get("type") if isinstance(ev, Done) else "abort"
        self._times.pop(id(r), None)
        # the batch that carried the finish reason is the end
        finished = t.last if t.final and t.last is not None else now
        s = _is_streaming(r)
        # A prefill worker hands its one sampled token to the decode: it reports no completion tokens itself.
        prompt, gen = len(r.input_ids), (0 if self.mode == "prefill" else len(r.out_ids))
        self.m.inc("prompt_tokens_total", prompt, is_streaming=s)
        self.m.inc("generation_tokens_total", gen, is_streaming=s)
        self.m.inc("num_requests_total", 1, is_streaming=s)
        self.m.observe("e2e_request_latency_seconds", finished - _created(r), is_streaming=s)
        if (
            self.mode != "prefill"
            and reason in ("stop", "length")
            and t.first is not None
            and gen > 1
            and finished - t.first > 0
        ):
            self.m.observe("request_time_per_output_token_seconds", (finished - t.first) / (gen - 1), is_streaming=s)
        self.m.observe("prompt_tokens_histogram", prompt)
        self.m.observe("uncached_prompt_tokens_histogram", prompt)  # no prefix cache: every prompt token computed
        self.m.observe("generation_tokens_histogram", gen)

    def on_abort(self, r) -> None:
        self.m.inc("num_aborted_requests_total")

    # -- scheduler side: the waiting queue and prefill forwards -----------------------------------
    def on_waiting(self, r) -> None:
        """`r` entered the prefill waiting queue (after bootstrap on a prefill, after its transfer on a decode)."""
        now = time.monotonic()
        t = self._t(r)
        t.wait = now
        if getattr(r, "health", False):
            return
        if self.mode == "prefill":
            self._stage("prefill_bootstrap", now - _recv(r))
        elif self.mode == "decode":
            if t.transfer is not None:
                self._stage("decode_transferred", now - t.transfer)
        else:
            self._stage("request_process", now - _recv(r))

    def on_forward(self, r) -> None:
        """A forward including `r` starts (each prefill chunk; the first one ends its queueing)."""
        now = time.monotonic()
        t = self._t(r)
        if t.fwd is None:
            t.fwd = now
            self.m.observe("queue_time_seconds", now - (t.wait if t.wait is not None else _recv(r)))
            if self.mode == "decode" and not getattr(r, "health", False):
                self._stage("decode_waiting", now - (t.wait or now))

    def on_extend(self, n_tokens: int, seconds: float) -> None:
        """One prefill forward (of one or several requests' chunks, n_tokens in all) took `seconds`."""
        if self.device_timer:
            self.m.inc("forward_execution_seconds_total", seconds, category="extend")
        self.total_prefill_uncached_tokens += n_tokens  # no prefix cache: every prompt token is computed
        self.total_prefill_busy_us += int(seconds * 1e6)
        self.m.inc("realtime_tokens_total", n_tokens, mode="prefill_compute")
        self.m.inc("prefill_effective_tokens_total", n_tokens, mode="input")

    def on_chunk(self, r, last: bool) -> None:
        """A prefill chunk of `r` was computed; `last` when its prompt is done (after on_extend of its forward)."""
        now = time.monotonic()
        t = self._t(r)
        t.chunks += 1
        if not last:
            self._stage("chunked_prefill", now - (t.last_chunk or t.fwd or now))
            t.last_chunk = now
            return
        if t.chunks > 1:
            self._stage("chunked_prefill", now - (t.last_chunk or t.fwd or now))
        self._stage("prefill_forward", now - (t.fwd or now))
        t.prefill_done = now

    def on_decode(self, batch, seconds: float) -> None:
        """One batched decode forward of len(batch) requests took `seconds`."""
        c = self._decode_children
        if c is None:
            m = self.m
            c = self._decode_children = (
                m.counter("forward_execution_seconds_total", category="decode")
                if self.device_timer and m.has("forward_execution_seconds_total")
                else None,
                m.counter("realtime_tokens_total", mode="decode") if m.has("realtime_tokens_total") else None,
            )
        if c[0] is not None and seconds >= 0:
            c[0].inc(seconds)
        if c[1] is not None:
            c[1].inc(len(batch))
        b, us = len(batch), int(seconds * 1e6)
        if b and us > 0:  # SGLang's decode moment totals (a step of b requests generates b tokens)
            mo = self.decode_moments
            mo[0] += 1.0
            mo[1] += b
            mo[2] += us
            mo[3] += b * b
            mo[4] += b * us
            mo[5] += b

    # -- PD milestones --------------------------------------------------------------------------
    def on_transfer_done(self, r) -> None:
        """Prefill: the room of `r` reached Success (its last chunk was queued for transfer at prefill end)."""
        t = self._t(r)
        if t.prefill_done is not None:
            self._stage("prefill_transfer_kv_cache", time.monotonic() - t.prefill_done)

    def on_prealloc(self, r) -> None:
        """Decode: `r` entered the prealloc queue."""
        now = time.monotonic()
        self._t(r).prealloc = now
        self._stage("decode_prepare", now - _recv(r))

    def on_alloc(self, r) -> None:
        """Decode: KV pages for `r` were allocated (the engine allocates before its bootstrap with the prefill)."""
        t = self._t(r)
        if t.prealloc is not None:
            self.m.observe("kv_transfer_alloc_ms", (time.monotonic() - t.prealloc) * 1000)

    def on_transfer_queue(self, r) -> None:
        """Decode: `r` is bootstrapped (its destination is at the prefill) and waits in the transfer queue."""
        now = time.monotonic()
        t = self._t(r)
        t.transfer = now
        self._stage("decode_bootstrap", now - (t.prealloc or now))

    def on_transferred(self, r) -> None:
        """Decode: the KV of `r` arrived; it joins the running batch at once (the prebuilt first token)."""
        self.on_waiting(r)
        self.on_forward(r)
        now = time.monotonic()
        fwd = self._t(r).fwd  # None for a request seen after its end (its record is a throwaway)
        self._stage("fake_output", now - (fwd if fwd is not None else now))

    # -- constants and gauges -------------------------------------------------------------------
    def emit_constants(self, model, pool, context_len: int) -> None:
        m = self.m
        m.set("weight_memory_usage_gb", sum(p.numel() * p.element_size() for p in model.p.values()) / GB)
        m.set("context_len", context_len)
        if pool is not None:
            m.set("kv_cache_memory_usage_gb", pool.pool.numel() * pool.pool.element_size() / GB)
            m.set("page_size", pool.page_size)
            m.set("num_pages", _usable_pages(pool))
            m.set("max_total_num_tokens", _usable_pages(pool) * pool.page_size)

    def emit_startup(self, phases: dict[str, float]) -> None:
        for phase, seconds in phases.items():
            self.m.set("startup_time_seconds", seconds, phase=phase)

    def gen_throughput(self, now: float) -> float:
        """Tokens per second over the last 5 s, as the gen_throughput gauge."""
        return self._tokens.rate(now)

    def tick(self, s, busy: bool) -> None:
        """Once per scheduler loop iteration: gauges, idle time, CPU time."""
        now = time.monotonic()
        m = self.m
        if self._was_idle:
            m.inc("scheduler_idle_seconds_total", now - self._last_tick)
        self._last_tick = now
        self._was_idle = not busy and not s.by_rid and not getattr(s, "inflight", None)
        cpu = time.process_time()
        if self._cpu_child is not None:
            self._cpu_child.inc(max(0.0, cpu - self._cpu))
        self._cpu = cpu
        if busy and now - self._gauges_at < GAUGE_INTERVAL_S:
            return
        self._gauges_at = now
        m.set("num_running_reqs", len(s.running))
        m.set("num_queue_reqs", len(s.waiting))
        m.set("gen_throughput", self._tokens.rate(now))
        m.set("decode_sum_seq_lens", sum(len(r.input_ids) + len(r.out_ids) for r in s.running))
        m.set("num_prefill_bootstrap_queue_reqs", len(getattr(s, "bootstrap", ())))
        m.set("num_prefill_inflight_queue_reqs", len(getattr(s, "inflight", ())))
        m.set("num_decode_prealloc_queue_reqs", len(getattr(s, "prealloc", ())))
        m.set("num_decode_transfer_queue_reqs", len(getattr(s, "transfer", ())))
        kv = getattr(s, "kv", None)
        if kv is None:
            return
        pool = kv.pool
        P = pool.page_size
        used, total = kv_tokens(pool)
        m.set("num_used_tokens", used)
        m.set("kv_used_tokens", used)
        m.set("kv_available_tokens", total - used)
        m.set("token_usage", used / total if total else 0.0)
        m.set("full_token_usage", used / total if total else 0.0)
        if self.mode == "decode" and total:
            pending = sum(len(r.input_ids) for r in s.prealloc if not r.pages)
            held = sum(len(r.pages) for q in (s.prealloc, s.transfer) for r in q) * P
            m.set("pending_prealloc_token_usage", pending / total)
            m.set("prealloc_full_token_usage", held / total)


def _usable_pages(pool) -> int:
    return pool.num_pages - 1  # the last page is the warm-up scratch target, never allocated


def kv_tokens(pool) -> tuple[int, int]:
    """(tokens the paged KV pool holds, its capacity in tokens), as num_used_tokens and max_total_num_tokens."""
    used = max(0, round(pool.used_fraction() * pool.num_pages) - 1) * pool.page_size  # the scratch page: never used
    return used, _usable_pages(pool) * pool.page_size


def _created(r) -> float:
    return r.created  # the HTTP layer made the request: what SGLang's tokenizer calls created_time


def _recv(r) -> float:
    return r.t_queue or r.created  # the scheduler took it from its inbox
