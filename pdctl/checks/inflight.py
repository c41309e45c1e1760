"""Inflight verdict (issue 4, layer "inflight"): drained, busy or pinned, from gauges sampled over a window.

The seed's question: is a residual inflight of 1 normal work (a post-prefill request waiting for decode to pull its
KV) or a pin (the 16-minute wedge: nonzero inflight, zero decode activity)? The answer needs a window, not a point:
  drained  every PD queue gauge is 0 in every sample of the window (and so at the end);
  busy     something is queued or running, but there is progress: decode generation tokens moved, or the queue
           contents changed (requests came and went);
  pinned   something is queued or running and NOTHING moved over the whole window: no generation tokens, no gauge
           changed.
Under load the counts keep moving while one room stays pinned, so queue changes alone would read busy for as long
as traffic flows. A second rule catches that case (issue 15): the cross-side room balance, prefill (bootstrap +
waiting + running + inflight) minus decode (prealloc + transfer). A healthy request is held on both sides at once
(the decode holds it in prealloc/transfer until its KV has arrived), so the balance wanders around 0; a pinned room
is held by the prefill alone, for good. Verdict pinned, while traffic flows, when over the last BALANCE_WINDOW_S
  the median balance is >= 1 and the prefill inflight queue was never 0.
A median, not a minimum: the two sides' gauges are read (and, in SGLang, refreshed) at different instants, so single
samples swing either way. A window shorter than BALANCE_WINDOW_S leaves the rule out and says so.
Pure: `judge_inflight(samples, window_s)`; `inflight_point(prefill_sets, decode_sets)` builds one sample's values;
`judge_points(points, window_s)` judges a series of `Point`s (one read of every worker each) and
`inflight_results(...)` makes the layer's check result.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from pdctl.checks.metric_names import (
    DECODE_PREALLOC_QUEUE,
    DECODE_TRANSFER_QUEUE,
    GENERATION_TOKENS,
    NUM_QUEUE_REQS,
    NUM_RUNNING_REQS,
    PREFILL_BOOTSTRAP_QUEUE,
    PREFILL_INFLIGHT_QUEUE,
)
from pdctl.checks.metrics import MetricSet
from pdctl.checks.result import NEXT_PAIR_RESTART, CheckResult, Status
from pdctl.serialize import to_data

LAYER = "inflight"
VERDICTS = ("drained", "busy", "pinned")
#: how long the room balance must hold before it calls a pin under load (issue 15: a 30 s median >= 1 from about
#: 21 s after the pin, never in ~1,000 s of loaded traffic without one; re-measured in docs/performance.md)
BALANCE_WINDOW_S = 30.0
BALANCE_MIN = 1.0
NO_PROGRESS, ROOM_BALANCE = "no-progress", "room-balance"  # what a pinned verdict rests on

InflightSample = tuple[float, Mapping[str, float], "float | None"]


@dataclass
class InflightVerdict:
    verdict: str  # drained | busy | pinned
    window_s: float
    covered_s: float  # time span the samples actually cover
    conclusive: bool  # covered_s >= window_s
    samples: int
    last: dict[str, float]  # gauges at the last sample
    peak: dict[str, float]  # max of each gauge over the window
    generation_tokens_delta: float | None  # decode progress over the window (None: not measured)
    queue_changes: int  # consecutive samples whose gauges differ
    nonzero_for_s: float  # how long the gauges have been continuously nonzero at the end
    no_progress_for_s: float  # time since the last progress seen (bounded by the window)
    notes: list[str] = field(default_factory=list)
    pinned_by: str = ""  # NO_PROGRESS | ROOM_BALANCE when pinned
    balance_median: float | None = None  # median room balance over the last balance_window_s (None: unknown)
    balance_window_s: float = BALANCE_WINDOW_S
    balance_covered_s: float = 0.0  # time span of the samples with a known balance
    json_extra = ("summary",)

    @property
    def summary(self) -> str:
        held = {k: fmt_count(v) for k, v in self.last.items() if v}
        if self.verdict == "drained":
            s = f"all PD queues 0 for {fmt_s(self.covered_s)}"
        elif self.verdict == "busy":
            prog = []
            if self.generation_tokens_delta:
                prog.append(f"+{fmt_count(self.generation_tokens_delta)} generation tokens")
            if self.queue_changes:
                prog.append(f"queue changed {self.queue_changes}x")
            s = f"nonzero ({_gauges(held) or 'drained at the end'}) with progress: {', '.join(prog)}"
            if self.balance_median is not None:
                s += f"; room balance median {fmt_count(self.balance_median)} over {fmt_s(self.balance_covered_s)}"
        elif self.pinned_by == ROOM_BALANCE:
            s = (
                f"pinned under load: the cross-side room balance held a median of {fmt_count(self.balance_median)} "
                f"over {fmt_s(self.balance_window_s)} while traffic flowed, and the prefill inflight queue was "
                f"never 0 ({_gauges(held)})"
            )
        else:
            s = f"{_gauges(held)} with NO decode progress and no queue change for {fmt_s(self.no_progress_for_s)}"
        if not self.conclusive:
            s += f" (only {fmt_s(self.covered_s)} of the {fmt_s(self.window_s)} window sampled: inconclusive)"
        return s

    def to_check_result(self, target: str) -> CheckResult:
        """drained = PASS; busy = WARN (normal work, worth a look); pinned = FAIL; inconclusive = at most WARN."""
        status = {"drained": Status.PASS, "busy": Status.WARN, "pinned": Status.FAIL}[self.verdict]
        if not self.conclusive and status is not Status.WARN:
            status = Status.WARN
        detail = self.summary
        if self.verdict == "pinned" and self.pinned_by == ROOM_BALANCE:
            detail += (
                "; observed: the prefill held more rooms than the decode waited for, for the whole balance "
                "window; inferred: a room the decode gave up is stuck in the prefill inflight queue (the "
                "seed's wedge, under load). Collect logs, then `pdctl restart --pair`"
            )
        elif self.verdict == "pinned":
            detail += (
                "; observed: no change in any gauge or in generation tokens; inferred: a room is stuck in the "
                "prefill inflight/transfer queue (the seed's wedge). Collect logs, then `pdctl restart --pair`"
            )
        # a window not yet sampled end to end has not shown a pin: never say "pinned" before it has
        observed = self.verdict if self.conclusive or self.verdict != "pinned" else "no progress yet (inconclusive)"
        return CheckResult(
            LAYER,
            target,
            "inflight",
            status,
            observed=observed,
            expected="drained, or busy with progress",
            detail=detail,
            data=to_data(self),
            next_step=NEXT_PAIR_RESTART if self.verdict == "pinned" else "",
        )


def fmt_count(v: float | None) -> str:
    """A counter or gauge for humans: an integer when it is one ('3', not '3.0'), else at most 2 decimals. Pure."""
    if v is None:
        return "n/a"
    v = float(v)
    if math.isnan(v):
        return "n/a"
    return str(int(v)) if v.is_integer() else f"{v:.2f}".rstrip("0").rstrip(".")


def fmt_s(seconds: float | None) -> str:
    """Seconds for humans, one decimal: '6.0s', '0.0s' (never '2.665e-05s' or '6.00493s'). Pure."""
    if seconds is None:
        return "n/a"
    s = f"{float(seconds):.1f}"
    return ("0.0" if s == "-0.0" else s) + "s"


def _gauges(d: Mapping[str, str]) -> str:
    return " ".join(f"{k.removeprefix('sglang:')}={v}" for k, v in d.items())


def _val(x: float | None) -> float:
    return 0.0 if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def judge_inflight(
    samples: Sequence[InflightSample],
    window_s: float,
    *,
    balances: Sequence[tuple[float, float | None]] = (),
    balance_window_s: float = BALANCE_WINDOW_S,
) -> InflightVerdict:
    """Judge the window ending at the last sample. `samples`: (t seconds, {gauge: value}, decode generation tokens
    total or None). Order does not matter. The last sample at or before the window start anchors the window.
    `balances`: (t, room balance or None) at the same instants (see room_balance_pin); without them only the
    no-progress rule can call a pin. Raises ValueError when there is no sample or window_s <= 0. Pure.
    """
    if not samples:
        raise ValueError("judge_inflight needs at least one sample")
    if window_s <= 0:
        raise ValueError("window_s must be > 0")
    ordered = sorted(samples, key=lambda s: s[0])
    t_end = ordered[-1][0]
    start = t_end - window_s
    first = 0
    for i, s in enumerate(ordered):
        if s[0] <= start + 1e-9:
            first = i
    win = ordered[first:]
    covered = t_end - win[0][0]
    conclusive = covered >= window_s - 1e-9
    notes: list[str] = []

    keys: list[str] = []
    for _t, g, _gen in win:
        keys.extend(k for k in g if k not in keys)

    def vec(g: Mapping[str, float]) -> tuple[float, ...]:
        return tuple(_val(g.get(k)) for k in keys)

    peak = {k: max(_val(g.get(k)) for _t, g, _ in win) for k in keys}
    last = {k: _val(win[-1][1].get(k)) for k in keys}
    nonzero = [any(v > 0 for v in vec(g)) for _t, g, _ in win]

    gen_delta: float | None = None
    queue_changes = 0
    last_progress_t = win[0][0]
    reset_seen = False
    for (t0, g0, n0), (t1, g1, n1) in zip(win, win[1:]):
        progressed = False
        if vec(g0) != vec(g1):
            queue_changes += 1
            progressed = True
        if n0 is not None and n1 is not None and not (math.isnan(n0) or math.isnan(n1)):
            gen_delta = gen_delta or 0.0
            if n1 > n0:
                gen_delta += n1 - n0
                progressed = True
            elif n1 < n0:
                gen_delta += n1  # counter reset: decode restarted
                reset_seen = True
                notes.append(f"generation tokens reset at t={fmt_s(t1)} (decode restarted?)")
                progressed = True
        if progressed:
            last_progress_t = t1
    if all(s[2] is None for s in win):
        notes.append("decode generation tokens not measured: progress judged from queue changes only")

    nonzero_for = 0.0
    if nonzero[-1]:
        j = len(win) - 1
        while j > 0 and nonzero[j - 1]:
            j -= 1
        nonzero_for = t_end - win[j][0]

    med, bal_covered, by_balance = room_balance_pin(ordered, balances, balance_window_s)
    pinned_by = ""
    if not any(nonzero):
        verdict = "drained"
    elif queue_changes or (gen_delta or 0) > 0 or reset_seen:
        verdict = "busy"
        if by_balance:
            verdict, pinned_by = "pinned", ROOM_BALANCE
        elif med is None:
            notes.append(
                "counts, not request ids, and no cross-side room balance: a single stuck room under "
                "steady traffic would also read as busy"
            )
        elif bal_covered < balance_window_s - 1e-6:
            notes.append(
                f"the room balance needs {fmt_s(balance_window_s)} of samples to call a pin under load "
                f"(had {fmt_s(bal_covered)}): a single stuck room under steady traffic would read as busy"
            )
    else:
        verdict, pinned_by = "pinned", NO_PROGRESS
    if pinned_by == ROOM_BALANCE and bal_covered >= balance_window_s - 1e-6:
        conclusive = True  # the balance window (longer than the queue window) is what the verdict rests on
    return InflightVerdict(
        verdict=verdict,
        window_s=window_s,
        covered_s=covered,
        conclusive=conclusive,
        samples=len(win),
        last=last,
        peak=peak,
        generation_tokens_delta=gen_delta,
        queue_changes=queue_changes,
        nonzero_for_s=nonzero_for,
        no_progress_for_s=t_end - last_progress_t,
        notes=notes,
        pinned_by=pinned_by,
        balance_median=med,
        balance_window_s=balance_window_s,
        balance_covered_s=bal_covered,
    )


def room_balance_pin(
    ordered: Sequence[InflightSample], balances: Sequence[tuple[float, float | None]], window_s: float
) -> tuple[float | None, float, bool]:
    """The room-balance rule over the last `window_s` of the series: (median balance or None when some sample in
    that span has no balance, time span covered, pinned). Pinned when the span covers the window, the median
    balance is >= BALANCE_MIN and the prefill inflight queue was nonzero in every sample of it. Pure."""
    if not balances or not ordered:
        return None, 0.0, False
    t_end = ordered[-1][0]
    series = [(t, b) for t, b in sorted(balances, key=lambda x: x[0]) if t <= t_end + 1e-9]
    # anchored like the queue window: the last sample at or before the window start opens it
    first = max([i for i, (t, _b) in enumerate(series) if t <= t_end - window_s + 1e-9], default=0)
    span = series[first:]
    values = [b for _t, b in span if b is not None and not math.isnan(b)]
    if not span or len(values) < len(span):
        return None, 0.0, False
    covered = span[-1][0] - span[0][0]
    med = statistics.median(values)
    inflight = [_val(g.get(PREFILL_INFLIGHT_QUEUE)) for t, g, _ in ordered if t >= span[0][0] - 1e-9]
    held = bool(inflight) and min(inflight) >= 1
    return med, covered, covered >= window_s - 1e-6 and med >= BALANCE_MIN and held


PREFILL_GAUGES = (PREFILL_BOOTSTRAP_QUEUE, PREFILL_INFLIGHT_QUEUE)
DECODE_GAUGES = (DECODE_PREALLOC_QUEUE, DECODE_TRANSFER_QUEUE, NUM_RUNNING_REQS)


def inflight_point(prefill: Iterable[MetricSet], decode: Iterable[MetricSet]) -> tuple[dict[str, float], float | None]:
    """One sample's values from the /metrics of every prefill and decode: the PD queue gauges of each side at
    tp_rank 0 (every TP rank reports the same queue, as in the seed's selection), summed over instances, and the
    decode side's generation tokens total (None when no decode exposes it; 0 when declared without series yet)."""
    prefill, decode = list(prefill), list(decode)
    gauges: dict[str, float] = {}
    for sets, names in ((prefill, PREFILL_GAUGES), (decode, DECODE_GAUGES)):
        for name in names:
            vals = [v for m in sets if (v := m.value(name, tp_rank="0")) is not None]
            if vals:
                gauges[name] = math.fsum(vals)
    gen: float | None = None
    for m in decode:
        if m.has(GENERATION_TOKENS):
            gen = (gen or 0.0) + (m.value(GENERATION_TOKENS) or 0.0)
    return gauges, gen


#: the rooms each side holds for the cross-side balance: a request sits in one of these on the prefill while the
#: decode holds it in prealloc or transfer (until the KV has arrived), so the difference stays near 0 under load
PREFILL_ROOM_GAUGES = (PREFILL_BOOTSTRAP_QUEUE, NUM_QUEUE_REQS, NUM_RUNNING_REQS, PREFILL_INFLIGHT_QUEUE)
DECODE_ROOM_GAUGES = (DECODE_PREALLOC_QUEUE, DECODE_TRANSFER_QUEUE)


def side_rooms(sets: Iterable[MetricSet], names: Sequence[str]) -> float | None:
    """The sum of `names` at tp_rank 0 over `sets`; None when any set lacks one of them (no balance then). Pure."""
    total = []
    for m in sets:
        for name in names:
            v = m.value(name, tp_rank="0")
            if v is None or math.isnan(v):
                return None
            total.append(float(v))
    return math.fsum(total)


@dataclass
class Point:
    """One sample of every worker, `t` seconds on the caller's clock (monotonic)."""

    t: float
    gauges: dict[str, float]  # summed over workers (inflight_point)
    generation_tokens: float | None  # decode side total
    per_worker: dict[str, dict[str, float]]  # label -> its PD gauges (tp_rank 0)
    counters: dict[str, dict[str, float]]  # label -> {transfer_failed, bootstrap_failed, generation_tokens}
    gen_throughput: dict[str, float]  # decode label -> sglang:gen_throughput (when exposed)
    errors: dict[str, str] = field(default_factory=dict)  # label -> why its metrics could not be read
    prefill_rooms: float | None = None  # PREFILL_ROOM_GAUGES summed over prefills (None: not exposed)
    decode_rooms: float | None = None  # DECODE_ROOM_GAUGES summed over decodes

    @property
    def balance(self) -> float | None:
        """Prefill rooms minus decode rooms: a room the prefill holds that no decode waits for (None: unknown)."""
        if self.prefill_rooms is None or self.decode_rooms is None:
            return None
        return self.prefill_rooms - self.decode_rooms

    @property
    def complete(self) -> bool:
        return not self.errors

    @property
    def inflight(self) -> float:
        return math.fsum(v for v in self.gauges.values())

    def counter_total(self, key: str) -> float:
        return math.fsum(c.get(key, 0.0) for c in self.counters.values())


def judge_points(
    points: Sequence[Point], window_s: float, *, balance_window_s: float = BALANCE_WINDOW_S
) -> tuple[InflightVerdict | None, list[str]]:
    """judge_inflight over the complete points (a point with an unreadable worker would fake a queue change), the
    room balance included; None when no point is complete. Pure."""
    good = [p for p in points if p.complete]
    notes = []
    if len(good) < len(points):
        notes.append(f"{len(points) - len(good)} sample(s) skipped: a worker's /metrics could not be read")
    if not good:
        return None, notes
    verdict = judge_inflight(
        [(p.t, p.gauges, p.generation_tokens) for p in good],
        window_s,
        balances=[(p.t, p.balance) for p in good],
        balance_window_s=balance_window_s,
    )
    return verdict, notes


def balance_suspects_pin(points: Sequence[Point], balance_window_s: float = BALANCE_WINDOW_S) -> bool:
    """Whether the complete points so far (at most the last balance window) look like a pin under load: every one
    has a balance, their median is >= BALANCE_MIN and the prefill inflight queue was never 0. The cue to keep
    sampling until the balance window is covered, so that a shorter window can still tell a pin from load. Pure."""
    good = [p for p in points if p.complete]
    if not good:
        return False
    span = [p for p in good if p.t >= good[-1].t - balance_window_s - 1e-9]
    balances = [p.balance for p in span if p.balance is not None]
    if len(balances) < len(span):
        return False
    return (
        statistics.median(balances) >= BALANCE_MIN
        and min(_val(p.gauges.get(PREFILL_INFLIGHT_QUEUE)) for p in span) >= 1
    )


def holders(points: Sequence[Point]) -> dict[str, dict[str, float]]:
    """Which workers hold nonzero gauges at the last complete point (the evidence of a pin). Pure."""
    last = next((p for p in reversed(points) if p.complete), None)
    if last is None:
        return {}
    return {label: {k: v for k, v in g.items() if v} for label, g in last.per_worker.items() if any(g.values())}


TARGET = "prefill+decode"  # the inflight check's target: the whole PD deployment, not one worker


def inflight_results(verdict: InflightVerdict | None, points: Sequence[Point], *, partial: bool) -> list[CheckResult]:
    """The inflight layer's check result: the verdict (naming the workers that hold a pin), FAIL when nothing could
    be read, and at most WARN for an interrupted series. Pure."""
    if verdict is None:
        why = "; ".join(f"{k}: {v}" for k, v in (points[-1].errors.items() if points else [])) or "no sample taken"
        return [
            CheckResult(
                LAYER,
                TARGET,
                "inflight",
                Status.FAIL,
                observed="no complete sample",
                expected="drained, or busy with progress",
                detail=why,
            )
        ]
    r = verdict.to_check_result(TARGET)
    held = holders(points)
    if verdict.verdict == "pinned" and verdict.conclusive and held:
        r.detail += "; held by " + ", ".join(f"{label} ({short_gauges(g)})" for label, g in held.items())
    if partial:
        r.detail += " (partial: sampling was interrupted)"
        if r.status is Status.FAIL:
            r.status = Status.WARN
    return [r]


def short_gauges(g: Mapping[str, float]) -> str:
    """'prefill_inflight_queue=1 running=2' for a gauge dict (zero values left out). Pure."""
    return " ".join(f"{k.removeprefix('sglang:num_').removesuffix('_reqs')}={v:g}" for k, v in g.items() if v)
