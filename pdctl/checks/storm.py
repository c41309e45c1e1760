"""The storm's judges: where each abort landed against the calibrated transfer window (the hit report), the
verdict on whether inflight drained to 0 and stayed 0 after the load (the seed's pass rule), and `judge_storm`, the
whole judgement over what a storm gathered (which workers held the rooms, since when, and the all-rejected rule).
Pure.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

from pdctl.checks.inflight import Point, fmt_count, fmt_s, short_gauges
from pdctl.checks.metric_names import PREFILL_INFLIGHT_QUEUE


@dataclass
class RequestOutcome:
    """What the client saw of one storm request. Times are seconds after its send."""

    index: int
    launch_at: float  # offset from the storm start
    planned_abort_s: float
    status_code: int | None = None
    first_token_s: float | None = None
    aborted_s: float | None = None  # when the connection was closed by us
    finished_s: float | None = None  # when the server ended the stream (before our abort)
    error: str | None = None


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
    hit_rate: float | None  # hits / aborted
    confirmed_in_window: float | None  # server side: transfer_failed delta + rooms still held at the end
    window: tuple[float, float] | None
    notes: list[str] = field(default_factory=list)


def judge_hits(
    outcomes: Sequence[RequestOutcome],
    window: tuple[float, float] | None,
    *,
    transfer_failed_delta: float | None = None,
    residual_inflight: float | None = None,
    concurrent: bool = False,
) -> HitReport:
    """The hit rate: the fraction of actual aborts that landed in the transfer window. Pure."""
    counts = {k: 0 for k in (HIT, EARLY, AFTER, LATE, COMPLETED, ERROR)}
    for o in outcomes:
        counts[classify(o, window)] += 1
    aborted = sum(counts[k] for k in (HIT, EARLY, AFTER, LATE))
    notes = []
    if window is None:
        notes.append("no calibration: hits cannot be judged by timing (only 'late' misses are certain)")
    elif concurrent:
        notes.append(
            "requests were launched together: queueing delays each one's window past the lone-request "
            "calibration, so timing-judged hits are an optimistic estimate"
        )
    confirmed = None
    if transfer_failed_delta is not None:
        confirmed = max(0.0, transfer_failed_delta) + max(0.0, residual_inflight or 0.0)
        notes.append(
            "confirmed = transfer_failed increase + rooms still queued at the end (aborts that reached a "
            "room whose KV was moving)"
        )
    rate = counts[HIT] / aborted if aborted and window is not None else None
    return HitReport(counts, aborted, counts[HIT], rate, confirmed, window, notes)


@dataclass
class StormVerdict:
    passed: bool
    reason: str
    drained_after_s: float | None  # load stop -> first sample of the final all-zero run
    last_inflight: float
    peak_inflight: float
    rose_again: bool  # drained, then nonzero again
    pinned: bool  # nonzero and unchanged over most of the watch, no decode progress


PINNED_SHARE = 0.75  # the unchanged final stretch must cover this share of the watch to call it pinned


def judge_watch(series: Sequence[tuple[float, float, float | None]], watch_s: float) -> StormVerdict:
    """The storm's verdict from (t since load stopped, total inflight, generation tokens) samples of the watch.

    Pass: inflight is 0 at the end and, once it reached 0, it stayed 0 (the seed's "must drain to 0 and stay 0").
    Fail otherwise; `pinned` when its final value stood unchanged, with no decode progress, over at least
    PINNED_SHARE of the watch. Pure.
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
            return StormVerdict(
                False,
                f"drained, rose again, drained at t+{fmt_s(drained)} (other traffic, or a room "
                "released late: look at the series)",
                drained,
                last,
                peak,
                True,
                False,
            )
        return StormVerdict(
            True,
            f"inflight drained to 0 by t+{fmt_s(drained)} and stayed 0 to t+{fmt_s(pts[-1][0])}",
            drained,
            last,
            peak,
            False,
            False,
        )
    # The final run of one unchanged value: a straggler that finishes just as the watch starts must not hide a pin.
    k = len(values) - 1
    while k > 0 and values[k - 1] == last:
        k -= 1
    tail = pts[k:]
    gens = [g for _t, _v, g in tail if g is not None]
    no_gen = len(gens) < 2 or gens[-1] == gens[0]
    stuck_for = tail[-1][0] - tail[0][0]
    pinned = no_gen and stuck_for >= PINNED_SHARE * watch_s - 1e-6
    if pinned:
        whole = "the whole" if k == 0 else f"the last {fmt_s(stuck_for)} of the"
        reason = (
            f"inflight stuck at {fmt_count(last)} for {whole} {fmt_s(covered)} watch with no decode progress: "
            "pinned (the seed's wedge)"
        )
    else:
        reason = f"inflight still {fmt_count(last)} at the end of the {fmt_s(covered)} watch (never drained)"
    return StormVerdict(False, reason, None, last, peak, rose, pinned)


def all_rejected_reason(outcomes: Sequence[RequestOutcome]) -> str | None:
    """Why the storm fails whatever inflight did, or None: when no request was aborted by us and none completed,
    every one was rejected (an HTTP error status) or failed, so the storm exercised nothing and an inflight of 0
    proves nothing. Pure."""
    if not outcomes or any(o.aborted_s is not None or classify(o, None) == COMPLETED for o in outcomes):
        return None
    causes = Counter(o.error or (f"HTTP {o.status_code}" if o.status_code else "no outcome") for o in outcomes)
    top = "; ".join(f"{n} x {cause}" for cause, n in causes.most_common(3))
    return (
        f"all {len(outcomes)} requests were rejected or failed (none aborted by the storm, none completed), "
        f"so nothing was exercised: {top}"
    )


@dataclass
class StormJudgement:
    """What `judge_storm` concluded: the verdict, the workers holding rooms at the end of a failed watch (label ->
    its nonzero gauges), the hit report (None without outcomes) and notes for the report."""

    verdict: StormVerdict
    holders: dict[str, dict[str, float]] = field(default_factory=dict)
    hits: HitReport | None = None
    notes: list[str] = field(default_factory=list)


def judge_storm(
    points: Sequence[Point],
    outcomes: Sequence[RequestOutcome],
    *,
    load_stopped_at: float | None,
    watch_s: float,
    partial: bool = False,
    verdict: StormVerdict | None = None,
    window: tuple[float, float] | None = None,
    calibrated: bool = False,
    concurrent: bool = False,
) -> StormJudgement:
    """The storm's judgement from its samples (t on the storm's clock; a sample with an unreadable worker is left
    out) and request outcomes. The watch is the samples from `load_stopped_at` on; a partial storm is judged over
    the watch it covered. A `verdict` already reached (a failed calibration) stands. A failed watch names the
    workers holding rooms at its end and since when inflight was nonzero; when every request was rejected the
    storm fails whatever inflight did (it drains trivially when nothing got in). Pure."""
    points = sorted(points, key=lambda p: p.t)
    good = [p for p in points if p.complete]
    notes = (
        [f"{len(points) - len(good)} sample(s) had an unreadable worker and were left out"]
        if len(good) < len(points)
        else []
    )
    stop = load_stopped_at
    watch = [p for p in good if stop is not None and p.t >= stop - 1e-6]
    holders: dict[str, dict[str, float]] = {}
    if watch and verdict is None and stop is not None:
        covered = watch[-1].t - watch[0].t
        verdict = judge_watch(
            [(p.t - stop, p.inflight, p.generation_tokens) for p in watch],
            min(watch_s, max(covered, 1e-6)) if partial else watch_s,
        )
        if not verdict.passed:
            holders = {
                label: {k: v for k, v in g.items() if v} for label, g in watch[-1].per_worker.items() if any(g.values())
            }
            nonzero_since = stop
            for p in reversed(watch):
                if p.inflight == 0:
                    break
                nonzero_since = p.t
            if holders:
                verdict.reason += (
                    f"; held by {', '.join(f'{k} ({short_gauges(v)})' for k, v in holders.items())}"
                    f" for {fmt_s(watch[-1].t - nonzero_since)} since the load stopped"
                )
    elif verdict is None:
        verdict = StormVerdict(False, "no complete sample after the load stopped", None, 0, 0, False, False)
    rejected = None if partial else all_rejected_reason(outcomes)
    if rejected:
        verdict = dataclasses.replace(verdict, passed=False, reason=f"{rejected}; inflight: {verdict.reason}")
    hits = None
    if outcomes:
        tf = good[-1].counter_total("transfer_failed") - good[0].counter_total("transfer_failed") if good else None
        residual = None
        if watch and good:  # rooms added to the prefill inflight queue by this storm and still held at the end
            residual = max(
                0.0,
                (watch[-1].gauges.get(PREFILL_INFLIGHT_QUEUE) or 0.0)
                - (good[0].gauges.get(PREFILL_INFLIGHT_QUEUE) or 0.0),
            )
        hits = judge_hits(outcomes, window, transfer_failed_delta=tf, residual_inflight=residual, concurrent=concurrent)
        if window is None and not calibrated:
            hits.notes.append("no calibration (--calibrate 0): hits are not judged by timing")
    return StormJudgement(verdict, holders, hits, notes)
