"""A playbook run's audit records: the "started" record before its first step (when a step that will run is
mutating) and the final record of how it ended, every text in them scrubbed of the run's secret values. Between
the two, the records its steps' actions append (a restart, a deploy) name the run (`playbook_run`)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Iterable

from pdctl.audit.writer import set_playbook_run
from pdctl.playbook.outcome import Data
from pdctl.serialize import to_data

if TYPE_CHECKING:
    from pdctl.playbook.planning import Plan
    from pdctl.playbook.run_result import RunResult, StepRun


def audit_args(p: Plan, secrets: Iterable[str]) -> dict[str, Data]:
    """What a record says the run was given: the playbook file, its vars and --apply, secrets masked."""
    from pdctl.secrets import mask_nested

    return mask_nested({"playbook": p.playbook.source, "vars": p.vars, "apply": p.apply}, secrets)


def audit_start(
    audit: ModuleType, result: RunResult, started: float, path: Path | None, secrets: Iterable[str]
) -> None:
    """Before the first step: a "started" record when a step that will run (handlers included) is mutating, else
    only the check that the log can be written; UsageError naming the log otherwise (so nothing runs that cannot
    be recorded)."""
    from pdctl.errors import UsageError

    p = result.plan
    try:
        if any(s.runs and s.kind.mutating for s in p.steps):
            audit.append(
                f"run {p.playbook.name}",
                inventory=p.inventory,
                args=audit_args(p, secrets),
                result=audit.STARTED,
                started=started,
                path=path,
                extra={"inventory_name": p.inventory_name, "run": result.run_id},
                deployment=p.inventory_name or None,
            )
        else:
            audit.check_writable(path)
    except UsageError as e:
        raise UsageError(f"{e.message}: refusing to run {p.playbook.name} (nothing was done)", hint=e.hint) from None
    # the records its steps' actions append (a restart, a deploy) name this run: its end says how they ended
    set_playbook_run(result.run_id)


def recorded_step(step: StepRun) -> dict[str, Data]:
    """A step as the audit record keeps it: its outcome without `data` (the --json document has it)."""
    d = to_data(step)
    if "result" in d:
        d["result"].pop("data", None)
    return d


def audit_end(audit: ModuleType, result: RunResult, started: float, path: Path | None, secrets: Iterable[str]) -> None:
    """The run's record, every text in it scrubbed of the run's secret values (audit masks names on its own).
    Later records no longer name the run, however this ends."""
    try:
        _append_end(audit, result, started, path, secrets)
    finally:
        set_playbook_run(None)


def _append_end(
    audit: ModuleType, result: RunResult, started: float, path: Path | None, secrets: Iterable[str]
) -> None:
    from pdctl.secrets import mask_nested, mask_text

    p = result.plan
    audit.append(
        f"run {p.playbook.name}",
        inventory=p.inventory,
        args=audit_args(p, secrets),
        result=mask_text(result.outcome_text, secrets),
        started=started,
        path=path,
        deployment=p.inventory_name or None,
        extra=mask_nested(
            {
                "inventory_name": p.inventory_name,
                "run": result.run_id,
                "exit_code": result.exit_code,
                "steps": [recorded_step(s) for s in result.steps],
                "recommendations": result.recommendations,
                "final_health": to_data(result.health),
            },
            secrets,
        ),
    )
