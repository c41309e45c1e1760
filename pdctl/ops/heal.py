"""`pdctl watch --heal`: the watch's hook that heals the known cases, guarded (pdctl.checks.heal decides).

After each inflight, pairs or flags round it reads the watch's state and asks `decide`. A confirmed case that a
guard stops is said once (a timeline line, pdctl_heals_total{outcome="refused"}), and again only when the guard
changes. With --heal=dry it says what it would do and does nothing. What the guards know of past heals (the budget,
a red final-health) is read from the audit log (checks.heal_ledger), at the start and again right before acting,
with the deployment lock: a watch started after another, or beside it, counts that one's heals, and a lock held by
an operator is waited for. Before acting it appends a "started" record "watch heal" holding the evidence (the
state's failing checks, inflight verdict and pairs, each involved worker's last gauges and counters, the log tails
of the involved instances), then runs the action itself (`restart --rolling` or `restart --pair`, which take the
deployment lock and write their own audit records), then appends the heal's end (same run id): done, failed or
refused (nothing done). Only a final-health that ran red stops further heals (a human must look).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

from pdctl import audit, state
from pdctl.checks.heal import (
    HealDecision,
    HealEvidence,
    HealPolicy,
    HealView,
    MetricsSeen,
    budget_exhausted,
    decide,
)
from pdctl.checks.heal_ledger import HEAL_ACTION, HealEnd, HealLedger, heal_end, heal_error_end, heal_ledger
from pdctl.checks.result import Status
from pdctl.checks.watch_events import HealEvent, HealOutcome
from pdctl.checks.watch_records import WatchSnapshot
from pdctl.checks.watch_state import WatchState
from pdctl.errors import ExitCode, PdctlError, UsageError
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
        """Reads the audit log for the heals so far (an unreadable log is said by the first refusal)."""
        s = dep.inv.watch
        self.dep, self.dry, self.clock = dep, dry, clock
        self.policy = policy or HealPolicy(s.heal_pin_after, s.heal_pair_failures, s.heal_max_per_hour)
        self.running = False
        self._unwritten: list[dict[str, Any]] = []  # ends of our heals the log refused: still counted
        self._said: tuple[str, str | None, bool] | None = None  # the last decision said: a refusal is said once
        self._busy = threading.Lock()
        self.ledger = self.read_ledger()

    def read_ledger(self, *, writable: bool = False) -> HealLedger:
        """The heals so far from the audit log (plus our own ends it could not take); with `writable`, the log is
        also checked writable (a heal records its evidence first). Never raises: a log that cannot be read (or
        written) is the ledger's `unreadable`, which stops every heal."""
        try:
            lines = audit.read_records(state.audit_log_path())
            if writable:
                audit.check_writable()
        except UsageError as e:  # not a regular file, unreadable: nothing can be counted, so nothing is done
            return HealLedger().with_unreadable(e.message.splitlines()[0])
        return heal_ledger(
            [*lines, *self._unwritten], deployment=self.dep.inv.name, inventory=self.dep.inv.source, now=self.clock()
        )

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
        d = decide(view, self.policy, ledger=self.ledger, now=now, healing=self.running)
        if d.act and not self.dry:  # about to act: what other watches and operators did meanwhile, read fresh
            self.ledger = self.read_ledger(writable=True)
            holder, unread = self._lock()
            d = decide(
                view,
                self.policy,
                ledger=self.ledger,
                now=now,
                healing=self.running,
                lock_holder=holder,
                lock_unread=unread,
            )
        with watch.lock:
            watch.state.heal_budget_exhausted = budget_exhausted(self.ledger.heals_at, now, self.policy)
        if d.case is None:
            self._said = None
            return
        if d.refused or self.dry:
            said = (d.case, d.guard, self.dry)
            if said != self._said:
                self._said = said
                outcome: HealOutcome = "refused" if d.refused else "dry"
                watch.record_heal(outcome)
                detail = d.refused or f"would run `pdctl {d.action}` (--heal=dry: nothing done)"
                watch.emit(_heal_line(watch, outcome, d, d.reason, detail))
            return
        self._heal(watch, d, snapshot, metrics)

    def _lock(self) -> tuple[str | None, str | None]:
        """(who holds the deployment lock, why it could not be read): a read, nothing taken."""
        from pdctl.ops.context import deployment_lock

        try:
            return deployment_lock(self.dep, HEAL_ACTION).holder(), None
        except PdctlError as e:
            return None, e.message.splitlines()[0]

    def _heal(self, watch: Watch, d: HealDecision, snapshot: WatchSnapshot, metrics: MetricsSeen | None) -> None:
        self.running = True
        self._said = None
        watch.emit(_heal_line(watch, "started", d, d.reason))
        try:
            end = self._run(d, snapshot, metrics)
        finally:
            self.running = False
            self.ledger = self.read_ledger()
        if end.outcome != "refused":  # something ran: the evidence that led here predates it
            with watch.lock:  # the next rounds must confirm anew...
                forget_evidence(watch.state)
            for clock in watch.clocks.values():  # ... and they run now, not a period later
                clock.due_now()
        watch.record_heal(end.outcome)
        watch.emit(_heal_line(watch, end.outcome, d, end.detail))

    def _run(self, d: HealDecision, snapshot: WatchSnapshot, metrics: MetricsSeen | None) -> HealEnd:
        """The evidence recorded, the action run, its end recorded (the same run id): how it ended."""
        from pdctl.ops.restart import PAIR, restart
        from pdctl.ops.rolling import rolling_restart

        run, started = uuid.uuid4().hex[:12], time.time()
        args = {"case": d.case, "action": d.action}

        def record(result: str, extra: dict) -> None:  # the heal's records: its start, its end, or its interrupt
            audit.append(
                HEAL_ACTION,
                inventory=self.dep.inv.source,
                deployment=self.dep.inv.name,
                args=args,
                result=result,
                started=started,
                extra=extra,
            )

        try:
            record(
                audit.STARTED,
                {"run": run, "reason": d.reason, "evidence": to_data(evidence(self.dep, d, snapshot, metrics))},
            )
        except UsageError as e:  # the evidence could not be recorded (the log was checked just before): nothing done
            return HealEnd("refused", None, "", e.exit_code, f"not acting: {e.message.splitlines()[0]}")
        try:
            if d.action == "restart --rolling":
                rolled = rolling_restart(self.dep, broken_pairs=d.pairs)  # the broken pairs go first
                end = heal_end(ok=rolled.ok, stopped=rolled.stopped, stopped_exit=rolled.stopped_exit)
            else:
                end = heal_end(ok=restart(self.dep, roles=PAIR).ok)
        except PdctlError as e:  # refused (the lock is held), unreachable, a step failed: said, never raised
            end = heal_error_end(e)
        except KeyboardInterrupt:  # the watch is stopped mid-heal: its end says so (best effort), then it stops
            with contextlib.suppress(UsageError):
                record(
                    "interrupted", HealEnd("failed", None, "interrupted", ExitCode.INTERRUPTED, "").record_fields(run)
                )
            raise
        fields = end.record_fields(run)
        try:
            record(end.result, fields)
        except UsageError as e:  # still counted by this watch; said with the outcome
            self._unwritten.append(
                {
                    **fields,
                    "action": HEAL_ACTION,
                    "inventory": self.dep.inv.source,
                    "deployment": self.dep.inv.name,
                    "result": end.result,
                    "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                }
            )
            return replace(end, detail=f"{end.detail} (its end is not in the audit log: {e.message.splitlines()[0]})")
        return end


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
