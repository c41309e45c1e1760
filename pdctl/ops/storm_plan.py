"""The pure parts of `pdctl storm`: the abort schedule, the calibration maths, the hit judgement and the verdict.

Nothing here does I/O; every function is deterministic given its inputs (and an explicit random.Random).

The seed's storm: 90 concurrent requests with ~20k-token prompts, each aborted by client disconnect at a uniform time
in 0.1-3 s, then inflight sampled every 12 s for 60 s. It missed the race: prefill of 20k tokens took ~6 s, so most
aborts landed before any KV chunk moved. `--target transfer-window` calibrates first:
  T  median client time to the first streamed token of a lone request (prefill + KV transfer + one decode step);
  L  mean KV transfer latency (prefill histogram sglang:kv_transfer_latency_ms, delta over the calibration);
  P  mean prefill time to first token (prefill histogram sglang:time_to_first_token_seconds, when it has samples).
The transfer window of a request is where its chunks move: from max(T - L, P) to T. Aborts are aimed uniformly in
[max(lo_frac*T, T - L, P), hi_frac*T] (defaults 0.6 and 0.9: the decode side notices a disconnect a little late, and
an abort after the last chunk is a plain cancel). The window's tail -- prefill done, last chunks still moving -- is
where an abort finds the room in the prefill inflight queue: the seed's pin.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field
from typing import Any, Sequence

# The seed's numbers are the CLI defaults; they live in pdctl.ops.defaults so that --help needs no ops module.
from pdctl.checks.inflight import fmt_count, fmt_s
from pdctl.ops.defaults import (SEED_ABORT_MAX_S, SEED_ABORT_MIN_S, SEED_PROMPT_TOKENS, SEED_REQUESTS,  # noqa: F401
                                SEED_SAMPLE_EVERY_S, SEED_WATCH_S, STORM_CALIBRATE, STORM_MAX_NEW_TOKENS,
                                STORM_TARGET)

TARGETS = ("random", "transfer-window")

#: hard caps so that no flag can make a storm unbounded
MAX_REQUESTS = 2000
MAX_PROMPT_TOKENS = 1_000_000
MAX_ABORT_S = 600.0
MAX_WATCH_S = 3600.0


@dataclass
class StormConfig:
    requests: int = SEED_REQUESTS
    prompt_tokens: int = SEED_PROMPT_TOKENS
    abort_min_s: float = SEED_ABORT_MIN_S
    abort_max_s: float = SEED_ABORT_MAX_S
    sample_every_s: float = SEED_SAMPLE_EVERY_S
    watch_s: float = SEED_WATCH_S
    target: str = STORM_TARGET
    max_new_tokens: int = STORM_MAX_NEW_TOKENS
    calib_requests: int = STORM_CALIBRATE
    aim_lo_frac: float = 0.6
    aim_hi_frac: float = 0.9
    spacing_s: float | None = None        # None: 0 for random, the calibrated service time for transfer-window
    seed: int | None = None
    request_timeout_s: float = 120.0      # cap of one calibration request
    path: str = "/generate"

    def __post_init__(self) -> None:
        """Validate; raises ValueError naming the bad option."""
        if self.target not in TARGETS:
            raise ValueError(f"--target {self.target!r}: choose {' or '.join(TARGETS)}")
        if not 1 <= self.requests <= MAX_REQUESTS:
            raise ValueError(f"--requests must be 1..{MAX_REQUESTS}")
        if not 1 <= self.prompt_tokens <= MAX_PROMPT_TOKENS:
            raise ValueError(f"--prompt-tokens must be 1..{MAX_PROMPT_TOKENS}")
        if not 0 <= self.abort_min_s <= self.abort_max_s <= MAX_ABORT_S:
            raise ValueError(f"need 0 <= --abort-min <= --abort-max <= {MAX_ABORT_S:g}")
        if not 0 < self.sample_every_s <= max(self.watch_s, 0.001):
            raise ValueError("--sample-every (--interval) must be > 0 and at most --watch (--window)")
        if not 0 < self.watch_s <= MAX_WATCH_S:
            raise ValueError(f"--watch (--window) must be in (0, {MAX_WATCH_S:g}]")
        if not 0 <= self.aim_lo_frac < self.aim_hi_frac <= 1.5:
            raise ValueError("--aim-from/--aim-to (aim fractions) need 0 <= from < to <= 1.5")
        if not 0 <= self.calib_requests <= 20:
            raise ValueError("--calibrate must be 0..20")
        if self.target == "transfer-window" and self.calib_requests < 1:
            raise ValueError("--target transfer-window needs --calibrate >= 1")
        if self.spacing_s is not None and not 0 <= self.spacing_s <= 600:
            raise ValueError("--spacing must be 0..600 s")
        if self.path not in ("/generate", "/v1/chat/completions"):
            raise ValueError("path must be /generate or /v1/chat/completions")


def random_schedule(n: int, lo: float, hi: float, rng: random.Random) -> list[float]:
    """n abort delays, uniform in [lo, hi] (the seed's 0.1-3 s)."""
    return [rng.uniform(lo, hi) for _ in range(n)]


@dataclass
class Calibration:
    ttft_s: list[float]                   # client time to first streamed token, one per calibration request
    transfer_latency_s: float | None      # mean KV transfer latency over the calibration (None: not exposed)
    prefill_ttft_s: float | None          # mean prefill-side time to first token (None: no samples)
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.ttft_s)

    @property
    def ttft(self) -> float:
        return statistics.median(self.ttft_s)

    def window(self, lo_frac: float = 0.6, hi_frac: float = 0.9) -> tuple[float, float]:
        """The aim window (seconds after send) for one lone request. Raises ValueError without a calibration."""
        if not self.ttft_s:
            raise ValueError("no successful calibration request")
        t = self.ttft
        hi = hi_frac * t
        lo = lo_frac * t
        if self.transfer_latency_s is not None and 0 < self.transfer_latency_s < t:
            lo = max(lo, t - self.transfer_latency_s)
        if self.prefill_ttft_s is not None and 0 < self.prefill_ttft_s < hi:
            lo = max(lo, self.prefill_ttft_s)
        if lo >= hi:  # transfers too fast to aim inside: aim at the last moments before the first token
            lo = max(0.0, hi - 0.05 * t)
        return lo, hi

    def service_time(self) -> float:
        """How long one request occupies the pair (the launch spacing that keeps requests from queueing behind each
        other, so that each one's window matches the calibration): the slower of prefill compute and transfer."""
        t = self.ttft
        parts = [x for x in (self.transfer_latency_s, self.prefill_ttft_s) if x is not None and x > 0]
        return min(t, max(parts)) if parts else t

    def to_dict(self) -> dict[str, Any]:
        return {"ttft_s": self.ttft_s, "ttft_median_s": self.ttft if self.ttft_s else None,
                "transfer_latency_s": self.transfer_latency_s, "prefill_ttft_s": self.prefill_ttft_s,
                "failures": self.failures}


def histogram_mean_delta(before: tuple[float, float] | None, after: tuple[float, float] | None) -> float | None:
    """Mean of the observations added between two (sum, count) reads of a histogram; None if none were added
    (or the histogram is absent, or reset in between)."""
    if after is None:
        return None
    s0, c0 = before or (0.0, 0.0)
    s1, c1 = after
    if c1 < c0:          # reset (process restarted): use the new totals
        s0, c0 = 0.0, 0.0
    dc = c1 - c0
    if dc <= 0:
        return None
    return (s1 - s0) / dc


def aimed_schedule(n: int, window: tuple[float, float], spacing_s: float, rng: random.Random
                   ) -> list[tuple[float, float]]:
    """(launch offset, abort delay after send) per request: launches `spacing_s` apart, each abort uniform in the
    calibrated window."""
    lo, hi = window
    return [(k * spacing_s, rng.uniform(lo, hi)) for k in range(n)]


@dataclass
class RequestOutcome:
    """What the client saw of one storm request. Times are seconds after its send."""

    index: int
    launch_at: float                       # offset from the storm start
    planned_abort_s: float
    status_code: int | None = None
    first_token_s: float | None = None
    aborted_s: float | None = None         # when the connection was closed by us
    finished_s: float | None = None        # when the server ended the stream (before our abort)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


HIT, EARLY, LATE, AFTER, COMPLETED, ERROR = "hit", "early", "late", "after-window", "completed", "error"


def classify(o: RequestOutcome, window: tuple[float, float] | None) -> str:
    """Where an abort landed, judged by timing against the calibrated window.

    completed: the server finished the stream before our abort; error: no abort happened for another reason;
    late: the first token arrived before the abort, so its KV transfer was already done (a certain miss);
    hit / early / after-window: abort time inside / before / after the window (without a window: 'early' stands
    for 'unknown').
    """
    if o.aborted_s is None:
        return COMPLETED if o.error is None and o.finished_s is not None else ERROR
    if o.first_token_s is not None and o.first_token_s <= o.aborted_s:
        return LATE
    if window is None:
        return EARLY
    lo, hi = window
    if o.aborted_s < lo:
        return EARLY
    if o.aborted_s > hi:
        return AFTER
    return HIT


@dataclass
class HitReport:
    counts: dict[str, int]
    aborted: int
    hits: int
    hit_rate: float | None                 # hits / aborted
    confirmed_in_window: float | None      # server side: transfer_failed delta + rooms still held at the end
    window: tuple[float, float] | None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def judge_hits(outcomes: Sequence[RequestOutcome], window: tuple[float, float] | None, *,
               transfer_failed_delta: float | None = None, residual_inflight: float | None = None,
               concurrent: bool = False) -> HitReport:
    """The hit rate: the fraction of actual aborts that landed in the transfer window. Pure."""
    counts = {k: 0 for k in (HIT, EARLY, AFTER, LATE, COMPLETED, ERROR)}
    for o in outcomes:
        counts[classify(o, window)] += 1
    aborted = sum(counts[k] for k in (HIT, EARLY, AFTER, LATE))
    notes = []
    if window is None:
        notes.append("no calibration: hits cannot be judged by timing (only 'late' misses are certain)")
    elif concurrent:
        notes.append("requests were launched together: queueing delays each one's window past the lone-request "
                     "calibration, so timing-judged hits are an optimistic estimate")
    confirmed = None
    if transfer_failed_delta is not None:
        confirmed = max(0.0, transfer_failed_delta) + max(0.0, residual_inflight or 0.0)
        notes.append("confirmed = transfer_failed increase + rooms still queued at the end (aborts that reached a "
                     "room whose KV was moving)")
    rate = counts[HIT] / aborted if aborted and window is not None else None
    return HitReport(counts, aborted, counts[HIT], rate, confirmed, window, notes)


@dataclass
class StormVerdict:
    passed: bool
    reason: str
    drained_after_s: float | None          # load stop -> first sample of the final all-zero run
    last_inflight: float
    peak_inflight: float
    rose_again: bool                       # drained, then nonzero again
    pinned: bool                           # nonzero at the end with no change at all over the watch

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def judge_watch(series: Sequence[tuple[float, float, float | None]], watch_s: float) -> StormVerdict:
    """The storm's verdict from (t since load stopped, total inflight, generation tokens) samples of the watch.

    Pass: inflight is 0 at the end and, once it reached 0, it stayed 0 (the seed's "must drain to 0 and stay 0").
    Fail otherwise; `pinned` when it never changed and decode made no progress over the whole watch. Pure.
    Raises ValueError without samples.
    """
    if not series:
        raise ValueError("no watch samples")
    pts = sorted(series, key=lambda p: p[0])
    values = [v for _t, v, _g in pts]
    peak, last = max(values), values[-1]
    first_zero = next((i for i, v in enumerate(values) if v == 0), None)
    rose = first_zero is not None and any(v > 0 for v in values[first_zero:])
    covered = pts[-1][0] - pts[0][0]
    if last == 0:
        j = len(values) - 1
        while j > 0 and values[j - 1] == 0:
            j -= 1
        drained = pts[j][0]
        if rose:
            return StormVerdict(False, f"drained, rose again, drained at t+{fmt_s(drained)} (other traffic, or a room "
                                       "released late: look at the series)", drained, last, peak, True, False)
        return StormVerdict(True, f"inflight drained to 0 by t+{fmt_s(drained)} and stayed 0 to t+{fmt_s(pts[-1][0])}",
                            drained, last, peak, False, False)
    gens = [g for _t, _v, g in pts if g is not None]
    stuck_values = len(set(values)) == 1
    no_gen = len(gens) < 2 or gens[-1] == gens[0]
    pinned = stuck_values and no_gen and covered >= watch_s - 1e-6
    if pinned:
        reason = (f"inflight stuck at {fmt_count(last)} for the whole {fmt_s(covered)} watch with no decode progress: pinned "
                  "(the seed's wedge)")
    else:
        reason = f"inflight still {fmt_count(last)} at the end of the {fmt_s(covered)} watch (never drained)"
    return StormVerdict(False, reason, None, last, peak, rose, pinned)


def prompt_ids(n: int, rng: random.Random) -> list[int]:
    """n token ids for /generate's input_ids: printable-ASCII ids (valid in every vocabulary, and in the bundled
    engine's byte vocabulary), random so that no prefix cache shortens the prefill."""
    return [rng.randrange(32, 127) for _ in range(n)]


def storm_bound_s(cfg: StormConfig, spacing_s: float, max_abort_s: float) -> float:
    """An upper bound of the load phase: last launch + its abort + slack for the connection close."""
    return (cfg.requests - 1) * spacing_s + max_abort_s + 10.0


def percent(x: float | None) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{100 * x:.0f}%"
