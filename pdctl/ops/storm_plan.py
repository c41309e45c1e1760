"""The pure parts of `pdctl storm` that plan it: the abort schedule and the calibration maths (its judges, the hit
report and the verdict, are in pdctl.checks.storm).

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
Under background traffic the histograms also gain the other requests' observations (short ones, mostly), which would
pull L and P toward them and the launch spacing below the storm's real service time (the requests then queue behind
each other and the aborts land early). So the calibration first measures the background for a moment (its rate and
mean per observation), then reads the histograms around each of its own requests and takes the background out
(`own_mean`). T itself is measured under the current queueing: that is what the storm's requests will meet.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field

# The seed's numbers are the CLI defaults; they live in pdctl.ops.defaults so that --help needs no ops module.
from pdctl.ops.defaults import (
    SEED_ABORT_MAX_S,
    SEED_ABORT_MIN_S,
    SEED_PROMPT_TOKENS,
    SEED_REQUESTS,  # noqa: F401
    SEED_SAMPLE_EVERY_S,
    SEED_WATCH_S,
    STORM_CALIBRATE,
    STORM_MAX_NEW_TOKENS,
    STORM_TARGET,
)

TARGETS = ("random", "transfer-window")

#: hard caps so that no flag can make a storm unbounded
MAX_REQUESTS = 2000
MAX_PROMPT_TOKENS = 1_000_000
MAX_ABORT_S = 600.0
MAX_WATCH_S = 3600.0
MAX_NEW_TOKENS = 100_000


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
    spacing_s: float | None = None  # None: 0 for random, the calibrated service time for transfer-window
    seed: int | None = None
    request_timeout_s: float = 120.0  # cap of one calibration request
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
        if not 0 < self.watch_s <= MAX_WATCH_S:  # first: a bad window is not the sampling interval's fault
            raise ValueError(f"--watch (--window) must be in (0, {MAX_WATCH_S:g}]")
        if not 0 < self.sample_every_s <= max(self.watch_s, 0.001):
            raise ValueError("--sample-every (--interval) must be > 0 and at most --watch (--window)")
        if not 0 <= self.aim_lo_frac < self.aim_hi_frac <= 1.5:
            raise ValueError("--aim-from/--aim-to (aim fractions) need 0 <= from < to <= 1.5")
        if not 1 <= self.max_new_tokens <= MAX_NEW_TOKENS:  # the engine rejects < 1: every request would fail
            raise ValueError(f"--max-new-tokens must be 1..{MAX_NEW_TOKENS}")
        if not 0 < self.request_timeout_s <= MAX_WATCH_S:
            raise ValueError(f"request timeout must be in (0, {MAX_WATCH_S:g}] s")
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
    ttft_s: list[float]  # client time to first streamed token, one per calibration request
    transfer_latency_s: float | None  # mean KV transfer latency over the calibration (None: not exposed)
    prefill_ttft_s: float | None  # mean prefill-side time to first token (None: no samples)
    failures: list[str] = field(default_factory=list)
    background_per_s: float = 0.0  # other traffic's prefill observations per second, seen before calibrating
    notes: list[str] = field(default_factory=list)
    json_extra = ("ttft_median_s",)

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

    @property
    def ttft_median_s(self) -> float | None:
        return self.ttft if self.ttft_s else None


def histogram_mean_delta(before: tuple[float, float] | None, after: tuple[float, float] | None) -> float | None:
    """Mean of the observations added between two (sum, count) reads of a histogram; None if none were added
    (or the histogram is absent, or reset in between)."""
    if after is None:
        return None
    s0, c0 = before or (0.0, 0.0)
    s1, c1 = after
    if c1 < c0:  # reset (process restarted): use the new totals
        s0, c0 = 0.0, 0.0
    dc = c1 - c0
    if dc <= 0:
        return None
    return (s1 - s0) / dc


def own_mean(
    before: tuple[float, float] | None, after: tuple[float, float] | None, own: int, background_mean: float | None
) -> float | None:
    """Mean of our `own` observations among those a histogram gained between two reads, the rest being background
    traffic whose mean observation is `background_mean` (measured just before, with none of ours). None when the
    histogram gained fewer than `own` observations (or is absent, or reset). Without background (or no background
    estimate) it is the plain mean of what was added. Pure."""
    if after is None or own <= 0:
        return None
    s0, c0 = before or (0.0, 0.0)
    s1, c1 = after
    if c1 < c0:
        s0, c0 = 0.0, 0.0
    dc, ds = c1 - c0, s1 - s0
    if dc < own:
        return None
    extra = dc - own
    if extra > 0 and background_mean is not None:
        ds -= extra * background_mean
        return max(ds / own, 0.0)
    return ds / dc


def aimed_schedule(
    n: int, window: tuple[float, float], spacing_s: float, rng: random.Random
) -> list[tuple[float, float]]:
    """(launch offset, abort delay after send) per request: launches `spacing_s` apart, each abort uniform in the
    calibrated window."""
    lo, hi = window
    return [(k * spacing_s, rng.uniform(lo, hi)) for k in range(n)]


def prompt_ids(n: int, rng: random.Random) -> list[int]:
    """n token ids for /generate's input_ids: printable-ASCII ids (valid in every vocabulary, and in the bundled
    engine's byte vocabulary), random so that no prefix cache shortens the prefill."""
    return [rng.randrange(32, 127) for _ in range(n)]


def storm_bound_s(cfg: StormConfig, spacing_s: float, max_abort_s: float) -> float:
    """An upper bound of the load phase: last launch + its abort + slack for the connection close."""
    return (cfg.requests - 1) * spacing_s + max_abort_s + 10.0


def percent(x: float | None) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{100 * x:.0f}%"
