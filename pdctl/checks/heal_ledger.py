"""The heal's trail in the audit log: how a heal ended (`HealEnd`, what its final "watch heal" record says) and, read
back, what the heal guards need to know across watches (`heal_ledger`: the heals of the last hour, and a heal whose
final-health ran red). The log is the memory: a watch started after another counts that one's heals too. Both
belong to the deployment (the name its inventory declares), not to the inventory file: a heal or an operator's
restart through a copy of the file counts.

A heal writes two records with one `run` id, as every mutating action does: "started" (with its evidence) before
acting, then its end: `result` ("ok", "final-health failed", "stopped: ...", "LockHeld: ...") with `exit_code`,
`outcome` (done, failed, refused), `final_health` (passed, red, or null: it did not run) and `spends_budget`.
Pure: pdctl.ops.heal reads the log and writes the records.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Optional

from pdctl.audit.records import AuditLine, InventoryFilter, record_time, result_word
from pdctl.audit.writer import STARTED
from pdctl.errors import LockHeld, PdctlError, RefusedError, UsageError

HEAL_ACTION = "watch heal"
HOUR_S = 3600.0
#: a heal dated ahead of the clock by more than this (the clock stepped back since) is left out of the budget: it
#: would otherwise count for its hour plus however far ahead it is. Within it: two hosts' clocks a little apart.
AHEAD_TOLERANCE_S = 300.0
#: an operator's action that ends ok, its final-health run and passed, re-arms healing after a red heal: someone has
#: looked and the deployment passed (`final_health_passed`)
REARMS = ("restart --pair", "restart --rolling", "deploy")
PLAYBOOK_RUN = "run "  # a playbook run's records: "run co-restart" (pdctl.playbook.run_audit)

EndOutcome = Literal["done", "failed", "refused"]
FinalHealth = Literal["passed", "red"]


@dataclass(frozen=True)
class HealEnd:
    """How one heal ended: its timeline outcome and detail, and what its final audit record holds."""

    outcome: EndOutcome  # refused: nothing was done (a lock, a guard of the action, a usage error)
    final_health: Optional[FinalHealth]  # None: final-health did not run (refused, stopped, an error)
    result: str  # the record's result, in the words every action's record uses
    exit_code: int  # what `pdctl restart` would have exited with: history's result word reads it
    detail: str  # the timeline's words
    spends_budget: bool = True  # False only when the lock was held: an operator's action is waited for, not spent

    def record_fields(self, run: str) -> dict[str, Any]:
        """The final record's own fields (besides action, args and result)."""
        return {
            "run": run,
            "outcome": self.outcome,
            "final_health": self.final_health,
            "exit_code": self.exit_code,
            "spends_budget": self.spends_budget,
        }


def heal_end(*, ok: bool, stopped: Optional[str] = None, stopped_exit: int = 1) -> HealEnd:
    """The end of a heal whose action returned: `ok` its final-health passed; `stopped` why a rolling restart stopped
    before its final-health (with the exit code it gives); else final-health ran and is red."""
    if ok:
        return HealEnd("done", "passed", "ok", 0, "final-health passed")
    if stopped:
        first = stopped.splitlines()[0]
        return HealEnd("failed", None, f"stopped: {first}", stopped_exit, f"stopped before final-health: {first}")
    return HealEnd("failed", "red", "final-health failed", 1, "final-health red: a human must look")


def heal_error_end(e: PdctlError) -> HealEnd:
    """The end of a heal whose action raised. A refusal (the lock held, a hazard or lint guard, a usage error: all
    raised before anything is stopped) is no failure: no final-health ran, so it never blocks the next heal."""
    first = e.message.splitlines()[0] if e.message else type(e).__name__
    result = f"{type(e).__name__}: {first}"
    if isinstance(e, (RefusedError, UsageError)):
        return HealEnd("refused", None, result, e.exit_code, first, not isinstance(e, LockHeld))
    return HealEnd("failed", None, result, e.exit_code, first)


@dataclass(frozen=True)
class HealRun:
    """One heal as the log tells it."""

    run: str  # its run id ("" for a record written before heals recorded their end)
    at: Optional[float]  # when it started (epoch seconds; None: its record has no time that parses)
    outcome: str  # done, failed, refused; "unfinished" (no end recorded: killed, or running); "unrecorded" (old)
    final_health: Optional[FinalHealth] = None
    spends_budget: bool = True


@dataclass(frozen=True)
class HealLedger:
    """What the guards read of the heals before this decision."""

    heals_at: tuple[float, ...] = ()  # starts of the heals of the last hour that spend the budget, oldest first
    red: Optional[HealRun] = None  # the last heal whose final-health ran red, unless an ok action re-armed since
    unreadable: Optional[str] = None  # why the log could not be read: then nothing can be counted
    ahead: tuple[float, ...] = ()  # starts of heals dated ahead of now beyond AHEAD_TOLERANCE_S: not counted

    def with_unreadable(self, why: str) -> "HealLedger":
        return HealLedger(self.heals_at, self.red, why, self.ahead)

    def ahead_note(self, now: float) -> Optional[str]:
        """What to say of the heals dated in the future (the clock stepped back), or None when there are none."""
        if not self.ahead:
            return None
        n, most = len(self.ahead), max(self.ahead) - now
        return (
            f"{n} heal{'s' if n > 1 else ''} in the audit log dated up to {_span(most)} ahead of this clock "
            "(stepped back?): not counted in the heal budget"
        )


def _span(seconds: float) -> str:
    return f"{seconds / 3600:.1f}h" if seconds >= 3600 else f"{seconds / 60:.0f}m"


def final_health_passed(record: dict[str, Any]) -> Optional[bool]:
    """Whether the action of `record` (restart, rolling, deploy, a playbook run) ran a final-health that passed:
    True; False when the one it ran (a playbook run: its last) was red, or when it ran none (args `verify: false`,
    `--no-verify`; a playbook run's `final_health: null`); None when the record does not say: written by a pdctl
    before restart, rolling and deploy recorded `verify`, it is read as then, the ok result standing for a pass."""
    fh = record.get("final_health")
    if isinstance(fh, dict):
        return fh.get("ok") is True
    args = record.get("args")
    if "final_health" in record or (isinstance(args, dict) and args.get("verify") is False):
        return False
    return None


def _ended(record: dict[str, Any], start: Optional[HealRun]) -> HealRun:
    word = result_word(record).word
    outcome = record.get("outcome")
    if outcome not in ("done", "failed", "refused"):
        outcome = "done" if word == "ok" else "refused" if word == "refused" else "failed"
    fh = record.get("final_health")
    at = start.at if start is not None else _epoch(record)
    return HealRun(
        str(record.get("run")),
        at,
        outcome,
        fh if fh in ("passed", "red") else None,
        record.get("spends_budget") is not False,
    )


def _epoch(record: dict[str, Any]) -> Optional[float]:
    when = record_time(record)
    return when.timestamp() if when is not None else None


def _no_file(path: str) -> Optional[str]:
    return None  # an older record without `deployment` is matched by its path, never by reading the file it names


def heal_ledger(lines: Iterable[AuditLine], *, deployment: str, inventory: str, now: float) -> HealLedger:
    """The ledger of the deployment called `deployment` (its name, as its inventory declares it: its records
    through any copy of the inventory; records written before they named it, through `inventory` itself) from the
    audit log's lines, oldest first.

    Counted in the budget: every heal started within the hour before `now`, unless its end says it spent none (the
    lock was held); one killed mid-way and one from before heals recorded their end count too. One dated more than
    AHEAD_TOLERANCE_S after `now` (the clock stepped back) is not counted: it is in `ahead`. Blocking: the last heal
    whose final-health ran red, until a later heal passes or an operator restarts or deploys the deployment after
    it, one rule for all (final_health_passed): a `restart --pair`, `restart --rolling` or `deploy` that ends ok
    with a final-health that ran and passed (one with `--no-verify` re-arms nothing), or a playbook run (`pdctl
    run co-restart`) that ends ok, its last final-health run and passed, whose steps ran one of those. A step's
    record (it names its run: `playbook_run`) re-arms at once only when it ran a final-health itself; one that ran
    none (a restart step with `verify: false`) leaves it to its run's end. An ok run whose steps restarted or
    deployed nothing (a read-only playbook, a shell step) re-arms nothing. Records of other deployments, corrupt
    lines and records without a time (for the budget) are left out. Pure."""
    source = inventory if inventory.startswith("<") else os.path.abspath(inventory)
    mine = InventoryFilter(source=source, name=deployment)
    runs: dict[str, HealRun] = {}
    old: list[HealRun] = []
    red: Optional[HealRun] = None
    rearming: set[str] = set()  # playbook runs whose steps restarted or deployed it (ok) since the last red heal
    for x in lines:
        if not isinstance(x, dict) or not mine.matches(x, _no_file):
            continue
        action, started = x.get("action"), x.get("result") == STARTED
        run = x.get("run") if isinstance(x.get("run"), str) else None  # a damaged record names no run
        ok = not started and result_word(x).word == "ok"
        if action == HEAL_ACTION:
            if not run:  # before heals had a run and an end: a heal began, end unknown
                old.append(HealRun("", _epoch(x), "unrecorded"))
            elif started:
                runs[run] = HealRun(run, _epoch(x), "unfinished")
            else:
                end = runs[run] = _ended(x, runs.get(run))
                if end.final_health is not None:
                    red = end if end.final_health == "red" else None
                    rearming.clear()  # what was done before this heal does not answer it
        elif action in REARMS and ok:
            within, passed = x.get("playbook_run"), final_health_passed(x)
            if isinstance(within, str) and passed is not True:
                rearming.add(within)  # a step that ran no final-health: its run's end decides
            elif passed is not False:  # None: an older record that does not say, read as then
                red = None  # after the red heal's own end: an operator's action, and it passed its final-health
        elif isinstance(action, str) and action.startswith(PLAYBOOK_RUN) and not started and run in rearming:
            rearming.discard(str(run))
            if ok and final_health_passed(x) is not False:
                red = None  # its steps restarted or deployed it, then its final-health passed
    dated = [r.at for r in [*runs.values(), *old] if r.spends_budget and r.at is not None]
    spent = sorted(t for t in dated if -AHEAD_TOLERANCE_S <= now - t < HOUR_S)
    ahead = sorted(t for t in dated if now - t < -AHEAD_TOLERANCE_S)
    return HealLedger(tuple(spent), red, ahead=tuple(ahead))
