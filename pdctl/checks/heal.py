"""The watch's guarded self-healing (issue 15, `pdctl watch --heal`): which known case is confirmed, what the
smallest healing action is, and whether the guards allow it now. Pure: the watch gathers, pdctl.ops.heal acts.

The known cases, and only these:
- pinned:             the inflight verdict has been `pinned` for longer than `pin_confirm_s` (the seed's wedge);
- pair-broken:        a prefill x decode pair failed `pair_failures` consecutive canaries;
- degraded-bootstrap: the lineage judge names a decode restarted under a long-running prefill AND a canary of such
                      a pair failed, once is enough: the lineage says why (a hazard alone, with every canary
                      passing, is alerted, not healed).
The action: on xPyD (two or more prefills and decodes) the rolling co-restart, which keeps the service up; a pin,
whose room never drains (the rolling restart waits for drains), and a 1P1D deployment get `restart --pair`.
The guards, in order: any target unknown (a host that did not answer: never act on what cannot be seen), a heal
already running, the audit log unreadable (the heals cannot be counted), the last heal's final-health ran red (a
human must look; a refusal or a heal stopped before its final-health is no red), the budget (at most
`max_per_hour` heals in the last hour, counted from the audit log across watches; then the watch says so and stops
acting until the hour has passed), and the deployment lock held by another operator (waited for, not spent).
What the log says of past heals is pdctl.checks.heal_ledger's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from pdctl.checks.heal_ledger import HOUR_S, HealLedger
from pdctl.checks.watch_records import CheckState, FailureCount, InflightSummary, PairState

CASES = ("pinned", "pair-broken", "degraded-bootstrap")


@dataclass(frozen=True)
class HealPolicy:
    pin_confirm_s: float = 60.0  # a pin must be seen this long first (a storm's abort can hold a room briefly)
    pair_failures: int = 3  # consecutive failed canaries (at the 30 s cadence: 90 s of a broken pair)
    max_per_hour: int = 2  # then alert (pdctl_heal_budget_exhausted) and stop acting


@dataclass(frozen=True)
class HealView:
    """What the watch knows now, reduced to what the decision needs."""

    pinned_for_s: float | None  # None: not pinned
    pair_failures: Mapping[tuple[int, int], int]  # (prefill, decode) -> consecutive failed canaries
    lineage_hazards: Sequence[tuple[int, int, str]]  # (prefill, decode, hazard) from pdctl.checks.lineage
    unknown: Sequence[str]  # targets that did not answer in their last round
    n_prefill: int
    n_decode: int


@dataclass
class HealDecision:
    case: str | None  # one of CASES, or None: nothing to heal
    action: str | None = None  # "restart --rolling" | "restart --pair"
    reason: str = ""  # what was seen, for the timeline and the audit record
    refused: str | None = None  # a guard that stops it now, in words
    guard: str | None = None  # which guard, stably named: a refusal is said again only when this changes
    evidence: list[str] = field(default_factory=list)
    pairs: list[tuple[int, int]] = field(default_factory=list)  # (prefill, decode) the canaries call broken

    @property
    def act(self) -> bool:
        return self.case is not None and self.refused is None


@dataclass(frozen=True)
class MetricsSeen:
    """The last inflight sample's raw numbers, per worker label."""

    per_worker_gauges: dict[str, dict[str, float]]  # its PD gauges (tp_rank 0)
    counters: dict[str, dict[str, float]]  # transfer_failed, bootstrap_failed, aborted, generation_tokens


@dataclass(frozen=True)
class HealEvidence:
    """What a heal saw before it acted: the "evidence" of its audit record ("watch heal"), written with
    pdctl.serialize.to_data (these keys, in this order, are what `pdctl history` and a postmortem read)."""

    case: str
    details: list[str]  # the decision's own evidence (which pairs failed how often)
    failing_checks: list[CheckState]  # failing or unknown
    inflight: InflightSummary
    pairs: list[PairState]
    failures_since_start: list[FailureCount]
    metrics: MetricsSeen | None  # None: no inflight sample yet
    log_tails: dict[str, str]  # worker label -> its last log lines, or why they could not be read


def confirmed_case(view: HealView, policy: HealPolicy) -> tuple[str | None, str, list[str], list[tuple[int, int]]]:
    """(case, reason, evidence, the broken pairs) of the most urgent confirmed known case, or (None, "", [], [])."""
    if view.pinned_for_s is not None and view.pinned_for_s >= policy.pin_confirm_s:
        return "pinned", f"inflight pinned for {view.pinned_for_s:.0f}s (>= {policy.pin_confirm_s:g}s)", [], []
    name = lambda k: f"prefill[{k[0]}] -> decode[{k[1]}]"  # noqa: E731
    # the lineage already says why: one failed canary of such a pair confirms it (the others need K in a row)
    hazards = {(i, j) for i, j, h in view.lineage_hazards if h == "degraded-bootstrap"}
    degraded = sorted(k for k, n in view.pair_failures.items() if n >= 1 and k in hazards)
    if degraded:
        return (
            "degraded-bootstrap",
            f"{len(degraded)} pair(s) broken after a decode restarted under their "
            f"long-running prefill: {', '.join(name(k) for k in degraded)}",
            [f"{name(k)} failed {view.pair_failures[k]} canaries in a row" for k in degraded],
            degraded,
        )
    broken = sorted(k for k, n in view.pair_failures.items() if n >= policy.pair_failures)
    names = [name(k) for k in broken]
    if broken:
        return (
            "pair-broken",
            f"{len(broken)} pair(s) failed {policy.pair_failures}+ canaries in a row: {', '.join(names)}",
            [f"{n}: {view.pair_failures[k]} in a row" for n, k in zip(names, broken)],
            broken,
        )
    return None, "", [], []


def smallest_action(case: str, view: HealView) -> str:
    if case != "pinned" and view.n_prefill >= 2 and view.n_decode >= 2:
        return "restart --rolling"
    return "restart --pair"


def decide(
    view: HealView,
    policy: HealPolicy,
    *,
    ledger: HealLedger,
    now: float,
    healing: bool = False,
    lock_holder: str | None = None,
    lock_unread: str | None = None,
) -> HealDecision:
    """The decision for this round. `ledger`: the heals so far, as the audit log tells them (checks.heal_ledger);
    `lock_holder`: who holds the deployment lock, described (None: free, or not read yet); `lock_unread`: why the
    lock could not be read (its host did not answer: unknown, never acted on)."""
    case, reason, evidence, pairs = confirmed_case(view, policy)
    if case is None:
        return HealDecision(None)
    d = HealDecision(case, smallest_action(case, view), reason, evidence=evidence, pairs=pairs)
    recent = [t for t in ledger.heals_at if now - t < HOUR_S]
    if view.unknown:
        d.guard = "unknown: " + ", ".join(view.unknown)
        d.refused = f"not acting: {', '.join(view.unknown)} did not answer (unknown is never acted on)"
    elif healing:
        d.guard, d.refused = "healing", "not acting: the previous heal is still running"
    elif ledger.unreadable:
        d.guard = "ledger"
        d.refused = f"not acting: the heals so far cannot be counted: {ledger.unreadable}"
    elif ledger.red is not None:
        d.guard = "red"
        d.refused = (
            f"not acting: the previous heal's final-health is red{_when(ledger.red.at)} (a human must look; "
            "a `pdctl restart --pair`, `restart --rolling` or `deploy`, or a playbook run that restarts it "
            "(`pdctl run co-restart`), that ends ok with its final-health run and passed re-arms healing)"
        )
    elif len(recent) >= policy.max_per_hour:
        d.guard = "budget"
        d.refused = (
            f"not acting: heal budget spent ({len(recent)} in the last hour, at most "
            f"{policy.max_per_hour}); next allowed in {HOUR_S - (now - min(recent)):.0f}s"
        )
        if note := ledger.ahead_note(now):  # a clock stepped back: what was left out of the count, said
            d.refused += f"; {note}"
    elif lock_holder is not None:
        d.guard = "lock"
        d.refused = f"not acting: the deployment lock is held by {lock_holder} (waiting for it to end)"
    elif lock_unread is not None:
        d.guard = "lock unread"
        d.refused = f"not acting: the deployment lock could not be read ({lock_unread})"
    return d


def _when(at: float | None) -> str:
    return "" if at is None else time.strftime(" (the heal of %Y-%m-%d %H:%M:%S)", time.localtime(at))


def budget_exhausted(heals_at: Iterable[float], now: float, policy: HealPolicy) -> bool:
    return sum(1 for t in heals_at if now - t < HOUR_S) >= policy.max_per_hour
