"""`pdctl watch --heal`: the watch's hook that heals the known cases, guarded (pdctl.checks.heal decides).

After each inflight, pairs or flags round it reads the watch's state and asks `decide`. A confirmed case that a
guard stops is said once (a timeline line, pdctl_heals_total{outcome="refused"}), and again only when the reason
changes. With --heal=dry it says what it would do and does nothing. Otherwise, before acting it appends an audit
record "watch heal" holding the evidence (the state's failing checks, inflight verdict and pairs, each involved
worker's last gauges and counters, the log tails of the involved instances), then runs the action itself
(`restart --rolling` or `restart --pair`, which take the deployment lock and write their own audit records), and
counts the heal done or failed; a red final-health after it stops all further heals (a human must look).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable

from pdctl import audit
from pdctl.checks.heal import (
    HealDecision,
    HealEvidence,
    HealPolicy,
    HealView,
    MetricsSeen,
    budget_exhausted,
    decide,
)
from pdctl.checks.result import Status
from pdctl.checks.watch_events import HealEvent, HealOutcome
from pdctl.checks.watch_records import WatchSnapshot
from pdctl.checks.watch_state import WatchState
from pdctl.errors import PdctlError, UsageError
from pdctl.ops.context import Deployment
from pdctl.serialize import to_data

if TYPE_CHECKING:
    from pdctl.ops.watch import Watch

DECIDES_AFTER = ("inflight", "pairs", "flags")  # the rounds whose evidence can confirm a case
LOG_LINES = 30


class Healer:
    def __init__(
        self,
        dep: Deployment,
        *,
        dry: bool,
        policy: HealPolicy | None = None,
        clock: Callable[[], float] = time.time,
    ):
        s = dep.inv.watch
        self.dep, self.dry, self.clock = dep, dry, clock
        self.policy = policy or HealPolicy(s.heal_pin_after, s.heal_pair_failures, s.heal_max_per_hour)
        self.heals_at: list[float] = []
        self.last_ok: bool | None = None
        self.running = False
        self._said: tuple[str, str | None, bool] | None = None  # the last decision said: a refusal is said once
        self._busy = threading.Lock()

    def __call__(self, watch: Watch, cadence: str) -> None:
        # rounds of different cadences call this from their own threads: one decides (and heals) at a time, the
        # others pass (their evidence is read by the next round that finds the healer free)
        if cadence not in DECIDES_AFTER or not self._busy.acquire(blocking=False):
            return
        try:
            self.dep = watch.dep  # the watch follows a changed inventory (ops.watch_follow): so does its heal
            self._decide_and_act(watch)
        finally:
            self._busy.release()

    def _decide_and_act(self, watch: Watch) -> None:
        now = self.clock()
        with watch.lock:
            view = view_of(watch.state, self.dep, now)
            snapshot = watch.state.snapshot(now)
            last = watch.state.points[-1] if watch.state.points else None
            metrics = MetricsSeen(dict(last.per_worker), dict(last.counters)) if last is not None else None
        d = decide(view, self.policy, heals_at=self.heals_at, now=now, last_heal_ok=self.last_ok, healing=self.running)
        with watch.lock:
            watch.state.heal_budget_exhausted = budget_exhausted(self.heals_at, now, self.policy)
        if d.case is None:
            self._said = None
            return
        if d.refused or self.dry:
            said = (d.case, d.refused, self.dry)
            if said != self._said:
                self._said = said
                outcome: HealOutcome = "refused" if d.refused else "dry"
                watch.record_heal(outcome)
                detail = d.refused or f"would run `pdctl {d.action}` (--heal=dry: nothing done)"
                watch.emit(_heal_line(watch, outcome, d, d.reason, detail))
            return
        self._heal(watch, d, snapshot, metrics)

    def _heal(self, watch: Watch, d: HealDecision, snapshot: WatchSnapshot, metrics: MetricsSeen | None) -> None:
        from pdctl.ops.restart import PAIR, restart
        from pdctl.ops.rolling import rolling_restart

        self.running = True
        self.heals_at.append(self.clock())
        self._said = None
        watch.emit(_heal_line(watch, "started", d, d.reason))
        outcome: HealOutcome
        try:
            audit.append(
                "watch heal",
                inventory=self.dep.inv.source,
                args={"case": d.case, "action": d.action},
                result=f"evidence recorded; running `pdctl {d.action}`",
                started=time.time(),
                extra={"reason": d.reason, "evidence": to_data(evidence(self.dep, d, snapshot, metrics))},
            )
            if d.action == "restart --rolling":
                rolled = rolling_restart(self.dep, broken_pairs=d.pairs)  # the broken pairs go first
                ok, why = rolled.ok, rolled.stopped or ""
            else:
                ok, why = restart(self.dep, roles=PAIR).ok, ""
            self.last_ok = ok
            outcome = "done" if ok else "failed"
            detail = (
                "final-health passed" if ok else f"final-health red or stopped: {why.splitlines()[0] if why else ''}"
            )
        except UsageError as e:  # the evidence could not be recorded: nothing was done
            outcome, detail = "refused", f"not acting: {e.message.splitlines()[0]}"
        except PdctlError as e:  # refused (the lock is held), unreachable, a step failed: said, never raised
            self.last_ok = False
            outcome, detail = "failed", e.message.splitlines()[0]
        finally:
            self.running = False
        with watch.lock:  # the evidence that led here predates the heal: the next rounds must confirm anew
            forget_evidence(watch.state)
        for clock in watch.clocks.values():  # ... and they run now, not a period later
            clock.due_now()
        watch.record_heal(outcome)
        watch.emit(_heal_line(watch, outcome, d, detail))


def _heal_line(watch: Watch, outcome: HealOutcome, d: HealDecision, observed: str, detail: str = "") -> HealEvent:
    # a decision with a case always has its action (checks.heal.decide)
    return HealEvent(watch.wall(), watch.state.deployment, outcome, d.case or "", d.action or "", observed, detail)


def forget_evidence(state: WatchState) -> None:
    """After a heal: pair failure runs, the failures counted, the pin and the lineage hazards are seen again from
    fresh rounds (the deployment restarted: what its processes counted is not about what runs now)."""
    for p in state.pairs.values():
        p.consecutive_failures = 0
    state.failures.forget()
    state.pin_started = None
    state.hazards.clear()


def view_of(state: WatchState, dep: Deployment, now: float) -> HealView:
    """The watch state reduced to what `decide` reads (labels mapped to matrix indices)."""
    inv = dep.inv
    index = {inv.label(role, k): k for role, k, _ in inv.instances() if role != "router"}
    pairs = {
        (index[p.prefill], index[p.decode]): p.consecutive_failures
        for p in state.pairs.values()
        if p.prefill in index and p.decode in index
    }
    hazards = [(index[p], index[d], kind) for (p, d), kind in state.hazards.items() if p in index and d in index]
    pinned = (
        state.pinned_seconds(now)
        if state.inflight is not None and state.inflight.verdict == "pinned" and state.pinned
        else None
    )
    return HealView(pinned, pairs, hazards, state.unknown_targets(), len(inv.roles.prefill), len(inv.roles.decode))


def evidence(dep: Deployment, d: HealDecision, snapshot: WatchSnapshot, metrics: MetricsSeen | None) -> HealEvidence:
    """What the heal saw, for its audit record: never raises (a log that cannot be read says why)."""
    failing = [c for c in snapshot.checks if c.status in (Status.FAIL, Status.UNKNOWN)]
    logs: dict[str, str] = {}
    for role, k, inst in dep.inv.instances():
        if role == "router":
            continue
        label = dep.inv.label(role, k)
        try:
            logs[label] = dep.services(inst.host).log_tail(dep.inv.service_name(role, k), lines=LOG_LINES)
        except PdctlError as e:
            logs[label] = f"unreadable: {e.message.splitlines()[0]}"
    return HealEvidence(
        d.case or "",
        d.evidence,
        failing,
        snapshot.inflight,
        snapshot.pairs,
        snapshot.failures_since_start,
        metrics,
        logs,
    )
