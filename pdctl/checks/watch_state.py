"""What `pdctl watch` knows across rounds: each check's last status, each target's reachability, the failures
counted on each worker and what the canaries made of them, the inflight window and its pin, the pair canaries, the
lineage hazards and the rounds. Pure: ops/watch.py feeds it observations with the time they were made; every
method returns the timeline lines the change made (checks.watch_state never reads a clock, a host or a file).

Statuses: pass | warn | fail | unknown. A target whose host could not be asked is unknown (never fail): its checks
turn unknown, and come back with what the next answer says ("recovered"). A counter that drops is a restart of the
process exposing it, never a failure (checks.watch_counters). A rise of a worker's failure counters is only suspect
until a canary through its pairs decides (checks.watch_failures).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Sequence

from pdctl.checks.inflight import BALANCE_WINDOW_S, InflightVerdict, Point, inflight_results, judge_points
from pdctl.checks.result import CheckResult, Status
from pdctl.checks.watch_counters import CounterTrack
from pdctl.checks.watch_failures import FailureLedger
from pdctl.checks.watch_samples import SampleLog
from pdctl.checks.watch_records import (
    CheckState,
    FailureCount,
    InflightSummary,
    LineageHazard,
    PairState,
    RoundInfo,
    WatchSnapshot,
)
from pdctl.checks.watch_events import (
    ChangeUnderWay,
    LineageChanged,
    PairCanaryDone,
    Restarted,
    RoundDone,
    RoundSkipped,
    TargetChanged,
    TimelineEvent,
)

#: the failure counters of read_point's Point.counters, by the `kind` label of pdctl_kv_failures_since_start
FAILURE_KINDS = {"transfer": "transfer_failed", "bootstrap": "bootstrap_failed"}
#: requests aborted (a client going away, or /abort_request): read as restart evidence only; an abort never
#: explains a failure (a client timing out on a broken pair aborts too): a canary decides (checks.watch_failures)
ABORTED = "aborted"
#: counters whose drop shows a restart (generation tokens move on every decode, so they show it best)
RESTART_EVIDENCE = (*FAILURE_KINDS.values(), ABORTED, "generation_tokens")


#: failed canaries in a row that make a pair broken (the PdctlPairBroken rule's threshold and the heal's default)
PAIR_BROKEN_AFTER = 3


def transfer_check_name(kind: str) -> str:
    """The transfer layer's check of one failure kind ('transfer failures', 'bootstrap failures')."""
    return f"{kind} failures"


@dataclass
class WatchState:
    deployment: str
    started: float  # unix time the watch started
    inflight_window_s: float = 20.0
    checks: dict[tuple[str, str, str], CheckState] = field(default_factory=dict)
    target_up: dict[str, bool] = field(default_factory=dict)
    target_why: dict[str, str] = field(default_factory=dict)  # an unknown target: why (which host, what it said)
    counters: dict[tuple[str, str], CounterTrack] = field(default_factory=dict)
    points: deque[Point] = field(default_factory=deque)
    inflight: InflightVerdict | None = None
    pin_started: float | None = None  # unix time the current pin began (its evidence: no progress since)
    pairs: dict[tuple[str, str], PairState] = field(default_factory=dict)
    hazards: dict[tuple[str, str], str] = field(default_factory=dict)  # (prefill, decode) -> hazard kind
    processes: dict[str, tuple[int | None, float | None]] = field(default_factory=dict)  # label -> (pid, start)
    rounds: dict[str, RoundInfo] = field(default_factory=dict)
    heals: dict[str, int] = field(default_factory=dict)  # outcome -> count (the heal's seam)
    heal_budget_exhausted: bool = False
    failures: FailureLedger = field(default_factory=FailureLedger)  # which failures a canary let stand
    canary_tokens: int = 0  # tokens the decodes generated for the watch's own canaries (pdctl_canary_...)
    change: str = ""  # who holds the deployment lock now ("" none): a deploy, restart or heal under way
    samples: SampleLog = field(default_factory=SampleLog)  # what the timeline's sample lines last said

    # -- checks and targets ------------------------------------------------------------------------------------
    def apply_checks(
        self, cadence: str, results: Iterable[CheckResult], t: float, *, unknown: Mapping[str, str] | None = None
    ) -> list[TimelineEvent]:
        """One round of `cadence`: its results (each target's checks of this round replace those it had from this
        cadence), and the targets it could not ask (`unknown`: target -> why): their checks of this cadence turn
        unknown. Returns the timeline lines: a line per check whose status changed (and per new check), plus a
        {"event": "target"} line when a target turns unknown or recovers."""
        lines: list[TimelineEvent] = []
        seen: dict[str, set[tuple[str, str, str]]] = {}
        for r in results:
            if r.status is Status.SKIP:
                continue
            key = (r.layer, r.target, r.name)
            seen.setdefault(r.target, set()).add(key)
            new = CheckState(
                cadence, r.layer, r.target, r.name, r.status, r.observed, r.expected, r.detail, t, r.next_step
            )
            old = self.checks.get(key)
            if old is not None and old.status == new.status:
                new.since = old.since
            self.checks[key] = new
            if old is None or old.status != new.status:
                lines.append(new.line(t, self.deployment))
        for target, keys in seen.items():  # a check this cadence no longer reports for the target is gone
            for key in [k for k, c in self.checks.items() if c.cadence == cadence and c.target == target]:
                if key not in keys:
                    del self.checks[key]
            lines += self._up(target, True, t)
        for target, why in (unknown or {}).items():
            lines += self._up(target, False, t, why)
            for c in self.checks.values():  # every check of the target: none of them was asked
                if c.target == target and c.status is not Status.UNKNOWN:
                    c.turn_unknown(why, t)
                    lines.append(c.line(t, self.deployment))
        return lines

    def _up(self, target: str, up: bool, t: float, why: str = "") -> list[TimelineEvent]:
        was = self.target_up.get(target)
        self.target_up[target] = up
        if up:
            self.target_why.pop(target, None)
        elif why:
            self.target_why[target] = why
        if was is None or was == up:
            return [] if up or was is not None else [TargetChanged(t, self.deployment, target, "unknown", why)]
        return [TargetChanged(t, self.deployment, target, "recovered" if up else "unknown", why)]

    # -- counters and restarts ---------------------------------------------------------------------------------
    def apply_counters(self, counters: Mapping[str, Mapping[str, float]], t: float) -> list[TimelineEvent]:
        """The raw counters of each target (read_point's Point.counters). A drop is a restart of that target's
        process: a {"event": "restart"} line, never a failure, and what the old process failed no longer stands;
        the raw totals since the watch started carry on."""
        lines: list[TimelineEvent] = []
        new_failures: dict[tuple[str, str], float] = {}
        for target, values in counters.items():
            before = {
                name: self.counters[(target, name)].total
                for name in RESTART_EVIDENCE
                if (target, name) in self.counters
            }
            reset = [
                name
                for name in RESTART_EVIDENCE
                if name in values and self.counters.setdefault((target, name), CounterTrack()).observe(values[name])
            ]
            grew = {
                name: self.counters[(target, name)].total - before.get(name, 0.0)
                for name in RESTART_EVIDENCE
                if (target, name) in self.counters
            }
            new_failures.update({(target, kind): grew[name] for kind, name in FAILURE_KINDS.items() if name in grew})
            if reset:
                self.failures.forget(target)
                lines.append(Restarted(t, self.deployment, target, f"counter reset: {', '.join(reset)}"))
        self.failures.observe(t, new_failures)
        return lines

    def failures_since_start(self) -> dict[tuple[str, str], float]:
        """(target, kind) -> transfer/bootstrap failures counted since the watch started, across resets."""
        return {
            (target, kind): self.counters[(target, name)].total
            for (target, name) in self.counters
            for kind, n in FAILURE_KINDS.items()
            if n == name
        }

    def unexplained_failures(self) -> dict[tuple[str, str], float]:
        """(target, kind) -> failures that stand: a canary through the worker's pairs failed after them, or none
        decided in time (checks.watch_failures); only the worker's current process's, within the window."""
        return self.failures.unexplained()

    def transfer_checks(self, unread: Mapping[str, str] | None = None) -> list[CheckResult]:
        """The "transfer" layer from the counters: each worker's failures that stand, 0 to pass; those awaiting a
        canary do not fail it yet. Workers in `unread` (label -> why: not read in this sample) are left out:
        their counters are not known now, and the inflight round judges them (checks.transfer.judge_unread: failed
        on a host that answers; unknown on one that does not)."""
        out = []
        for (target, kind), left in sorted(self.unexplained_failures().items()):
            if target in (unread or {}):
                continue
            waiting = self.failures.pending_count((target, kind))
            explained = self.failures.explained.get((target, kind), 0.0)
            why = [f"{left:g} a canary did not explain"] if left else []
            why += [f"{explained:g} explained: a canary through its pairs passed after them"] if explained else []
            why += [f"{waiting:g} awaiting a canary"] if waiting else []
            status = Status.PASS if left == 0 else Status.FAIL
            out.append(
                CheckResult(
                    "transfer",
                    target,
                    transfer_check_name(kind),
                    status,
                    observed="; ".join(why) or "0",
                    expected="0 that a canary does not explain",
                    detail=(
                        f"counted since its process started, for {self.failures.window_s:g}s at most; "
                        "each rise sends a canary through its pairs"
                    ),
                    next_step="" if left == 0 else "pdctl verify pairs; pdctl triage",
                )
            )
        return out

    def apply_processes(self, seen: Mapping[str, tuple[int | None, float | None]], t: float) -> list[TimelineEvent]:
        """label -> (pid, start time) of the running main processes: a changed pid is a restart line."""
        lines: list[TimelineEvent] = []
        for label, (pid, start) in seen.items():
            old = self.processes.get(label)
            if old is not None and old[0] is not None and pid is not None and old[0] != pid:
                self.failures.forget(label)
                lines.append(Restarted(t, self.deployment, label, f"pid {old[0]} -> {pid}"))
            self.processes[label] = (pid, start)
        return lines

    # -- inflight --------------------------------------------------------------------------------------------
    def apply_point(self, point: Point, t: float) -> list[TimelineEvent]:
        """One inflight sample (`point.t` on the caller's monotonic clock, `t` unix time): slides the window,
        judges it, follows the pin, and folds the counters the sample carried in."""
        lines = self.apply_counters(point.counters, t) + self.samples.lines(point, t, self.deployment)
        self.points.append(point)
        # keep the longer of the two windows: the queue rule's, and the room balance's (a pin under load)
        keep = max(self.inflight_window_s, BALANCE_WINDOW_S)
        while len(self.points) > 1 and self.points[1].t <= point.t - keep:
            self.points.popleft()  # one point at or before the window's start anchors it
        verdict, _notes = judge_points(list(self.points), self.inflight_window_s)
        why_not = self.failing_not_pinned() if verdict is not None and verdict.verdict == "pinned" else ""
        if verdict is not None and why_not:
            verdict = replace(verdict, verdict="busy", pinned_by="", notes=[*verdict.notes, why_not])
        self.inflight = verdict
        if verdict is None or verdict.verdict != "pinned" or not verdict.conclusive:
            self.pin_started = None
        elif self.pin_started is None:
            self.pin_started = t - verdict.no_progress_for_s  # the pin began when progress last stopped
        return lines + self.apply_checks("inflight", inflight_results(verdict, list(self.points), partial=False), t)

    def failing_not_pinned(self) -> str:
        """Why rooms that make no progress now are failing ones, not a pin ("" when nothing says so): a pair canary
        fails (a broken pair's rooms wait, then fail: PdctlPairBroken is that page), or KV failures were counted
        that no passing canary explained (failed rooms, retried: the degraded bootstrap). A pinned room never
        fails, it waits for ever; and the abort storm that makes a pin counts failures a passing canary explains."""
        failing = sorted(f"{p.prefill} -> {p.decode}" for p in self.pairs.values() if p.status is Status.FAIL)
        if failing:
            return f"not a pin: the canary of {', '.join(failing)} fails (its rooms wait, then fail)"
        waiting = sum(self.failures.pending_count(k) for k in self.failures.pending)
        standing = sum(self.unexplained_failures().values())
        if waiting or standing:
            return (
                f"not a pin: {waiting + standing:g} KV failure(s) counted that no passing canary explained "
                "(rooms fail and are retried)"
            )
        return ""

    @property
    def pinned(self) -> bool:
        return self.pin_started is not None

    def pinned_seconds(self, now: float) -> float:
        return 0.0 if self.pin_started is None else max(0.0, now - self.pin_started)

    @property
    def busy(self) -> bool:
        return self.inflight is not None and self.inflight.verdict == "busy"

    # -- pairs and lineage -----------------------------------------------------------------------------------
    def apply_pairs(
        self, results: Sequence[tuple[str, str, str, float | None]], t: float, *, started: float | None = None
    ) -> list[TimelineEvent]:
        """(prefill label, decode label, pass|fail|unknown, latency s or None) of each pair's canary in a round that
        started at `started` (unix time; default `t`). Consecutive failures count fails in a row; an unknown canary
        neither breaks nor extends the run, and a canary through a worker whose /health fails is unknown: the
        worker's own alert (PdctlTargetDown) says it, not its pairs. The round then decides the failures
        its workers counted before it started (checks.watch_failures)."""
        worker: dict[str, list[Status]] = {}
        for p, d, status, latency in results:
            st = self.pairs.setdefault((p, d), PairState(p, d))
            st.status = Status(status)
            if st.status is Status.FAIL and (self.health_fails(p) or self.health_fails(d)):
                st.status = Status.UNKNOWN
            worker.setdefault(p, []).append(st.status)
            worker.setdefault(d, []).append(st.status)
            if st.status is Status.UNKNOWN:
                continue
            st.latency_s = latency
            st.consecutive_failures = st.consecutive_failures + 1 if st.status is Status.FAIL else 0
        verdicts = {
            w: Status.FAIL
            if Status.FAIL in got
            else (Status.PASS if all(s is Status.PASS for s in got) else Status.UNKNOWN)
            for w, got in worker.items()
        }
        self.failures.decide(t if started is None else started, verdicts)
        # as judged (a canary through a worker whose /health fails is unknown), for the incident write-up's charts
        return [
            PairCanaryDone(t, self.deployment, p, d, self.pairs[(p, d)].status.value, latency)
            for p, d, _status, latency in results
        ]

    def health_fails(self, target: str) -> bool:
        """The target's last GET /health failed (refused, timed out, an error status)."""
        health = self.checks.get(("health", target, "/health"))
        return health is not None and health.status is Status.FAIL

    def serving(self, target: str) -> bool:
        """False when the target's host did not answer, or its last GET /health failed (not serving requests)."""
        return self.target_up.get(target) is not False and not self.health_fails(target)

    def unconfirmed_failures(self, confirm_after: int = PAIR_BROKEN_AFTER) -> list[PairState]:
        """Pairs whose last canary failed, fewer than `confirm_after` times in a row: the watch canaries them again
        soon rather than a full period later (that many in a row is the page, PdctlPairBroken)."""
        return [p for p in self.pairs.values() if p.status is Status.FAIL and p.consecutive_failures < confirm_after]

    def apply_hazards(self, hazards: Mapping[tuple[str, str], str], t: float) -> list[TimelineEvent]:
        """The lineage judge's hazardous pairs now; a line for each that appears or clears."""
        lines: list[TimelineEvent] = []
        for key in sorted(set(hazards) | set(self.hazards)):
            now, was = hazards.get(key), self.hazards.get(key)
            if now != was:
                hazard = now or was or ""  # one of the two is set: they differ
                lines.append(LineageChanged(t, self.deployment, key[0], key[1], hazard, "hazard" if now else "cleared"))
        self.hazards = dict(hazards)
        return lines

    def keep_declared(self, labels: set[str], pair_names: set[str]) -> None:
        """After the inventory changed: forget what was seen of instances (and pairs) no longer declared."""

        def declared(target: str) -> bool:
            return target in labels or target in pair_names or ("@" not in target and " -> " not in target)

        self.checks = {k: c for k, c in self.checks.items() if declared(c.target)}
        for book in (self.target_up, self.target_why, self.processes):
            for target in [t for t in book if not declared(t)]:
                del book[target]
        self.pairs = {k: p for k, p in self.pairs.items() if k[0] in labels and k[1] in labels}
        self.hazards = {k: h for k, h in self.hazards.items() if k[0] in labels and k[1] in labels}
        self.counters = {k: c for k, c in self.counters.items() if k[0] in labels}
        for target in {k[0] for k in self.failures.pending} - labels:
            self.failures.drop(target)

    def apply_change(self, holder: str, t: float) -> list[TimelineEvent]:
        """Who holds the deployment lock now ("" nobody): a line when a change starts or ends."""
        was, self.change = self.change, holder
        if bool(was) == bool(holder):
            return []
        return [ChangeUnderWay(t, self.deployment, "started" if holder else "ended", holder or was)]

    # -- rounds and the verdict ------------------------------------------------------------------------------
    def round_done(self, cadence: str, t: float, seconds: float) -> RoundDone:
        info = self.rounds.setdefault(cadence, RoundInfo())
        ok = not any(c.status is Status.FAIL for c in self.checks.values() if c.cadence == cadence)
        info.last_complete, info.seconds, info.rounds, info.error, info.ok = t, seconds, info.rounds + 1, None, ok
        return RoundDone(t, self.deployment, cadence, ok, round(seconds, 3))

    def round_failed(self, cadence: str, why: str) -> None:
        """A round that raised: the cadence reads unknown until one of its rounds ends."""
        self.rounds.setdefault(cadence, RoundInfo()).error = why

    def round_errors(self) -> dict[str, str]:
        return {c: i.error for c, i in sorted(self.rounds.items()) if i.error is not None}

    def round_skipped(self, cadence: str, t: float) -> RoundSkipped:
        info = self.rounds.setdefault(cadence, RoundInfo())
        info.skipped += 1
        return RoundSkipped(t, self.deployment, cadence)

    def unknown_targets(self) -> list[str]:
        """Targets whose host did not answer in their last round (with or without checks seen before)."""
        return sorted(t for t, up in self.target_up.items() if not up)

    def _statuses(self) -> set[Status]:
        nothing_seen = not self.checks and not any(i.rounds for i in self.rounds.values())  # nothing known yet
        return {c.status for c in self.checks.values()} | (
            {Status.UNKNOWN} if self.unknown_targets() or self.round_errors() or nothing_seen else set()
        )

    def verdict(self) -> Status:
        """fail when any check fails; else unknown when any check or target is unknown, a cadence's last round
        raised, or no round has ended yet (`watch --for 0.001`: nothing was looked at, never a pass); else warn
        when any warns; else pass."""
        statuses = self._statuses()
        for s in (Status.FAIL, Status.UNKNOWN, Status.WARN):
            if s in statuses:
                return s
        return Status.PASS

    def exit_code(self) -> int:
        """final-health's: 1 a check failed, else 3 something could not be asked (unknown), else 0 (as the verdict:
        a failure seen outranks what could not be looked at)."""
        statuses = self._statuses()
        return 1 if Status.FAIL in statuses else (3 if Status.UNKNOWN in statuses else 0)

    # -- the one document (--json) ---------------------------------------------------------------------------
    def inflight_summary(self, now: float) -> InflightSummary:
        return InflightSummary(
            self.inflight.verdict if self.inflight else Status.UNKNOWN.value,
            self.inflight.summary if self.inflight else "",
            self.pinned,
            self.pinned_seconds(now),
        )

    def failure_counts(self) -> list[FailureCount]:
        return [FailureCount(t, k, n) for (t, k), n in sorted(self.failures_since_start().items())]

    def snapshot(self, now: float) -> WatchSnapshot:
        """Everything the watch knows at `now` (copies: the state goes on changing). Pure."""
        checks = sorted(self.checks.values(), key=lambda c: (c.status is Status.PASS, c.layer, c.target, c.check))
        return WatchSnapshot(
            deployment=self.deployment,
            verdict=self.verdict(),
            exit_code=self.exit_code(),
            started=self.started,
            checks=[replace(c) for c in checks],
            targets_up=dict(self.target_up),
            unknown_targets=self.unknown_targets(),
            round_errors=self.round_errors(),
            unknown_why={t: self.target_why[t] for t in self.unknown_targets() if t in self.target_why},
            inflight=self.inflight_summary(now),
            pairs=[replace(p) for p in self.pairs.values()],
            failures_since_start=self.failure_counts(),
            lineage_hazards=[LineageHazard(p, d, h) for (p, d), h in sorted(self.hazards.items())],
            rounds={c: replace(i) for c, i in self.rounds.items()},
            heals=dict(self.heals),
            heal_budget_exhausted=self.heal_budget_exhausted,
        )
