"""`pdctl history`: the audit log (every mutating action and playbook run), newest last."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Annotated, Optional, get_args

import typer

from pdctl.cli.common import InventoryOpt, JsonOpt, ReportOpt, handle_errors

# The shared -i/--inventory option (same names, same PDCTL_INVENTORY), with what it means here: a filter.
_inv_info = copy.copy(get_args(InventoryOpt)[1])  # the typer.Option of the Annotated
_inv_info.help = (
    "Only records of this inventory: an inventory file (matched by its path) or an inventory's "
    "name. Without it: the records of every inventory."
)
HistoryInventoryOpt = Annotated[Optional[Path], _inv_info]


@handle_errors
def history(
    inventory: HistoryInventoryOpt = None,
    json_out: JsonOpt = False,
    n: Annotated[int, typer.Option("-n", "--lines", min=1, help="Show the last N records.")] = 20,
    action: Annotated[
        Optional[str],
        typer.Option(
            "--action", help="Only records of this action: exact ('run final-health') or its first word ('run')."
        ),
    ] = None,
    result: Annotated[
        Optional[str],
        typer.Option(
            "--result",
            help="Only records with this result: ok, failed, refused, unreachable, usage, interrupted, "
            "unfinished, 'taken over' or unrecorded (the record does not say how it ended).",
        ),
    ] = None,
    since: Annotated[
        Optional[str],
        typer.Option(
            "--since",
            metavar="WHEN",
            help="Only records from WHEN on: an ISO time (2025-01-01T10:00, local time "
            "without an offset) or a time ago (30m, 2h, 1d).",
        ),
    ] = None,
    until: Annotated[
        Optional[str], typer.Option("--until", metavar="WHEN", help="Only records up to WHEN (as for --since).")
    ] = None,
    report: ReportOpt = None,
) -> None:
    """Show the audit log, one line per record; --json has the full records. Corrupt lines are shown as such.

    Result: ok, failed, refused, unreachable, usage, interrupted, unfinished, taken over or unrecorded, then the
    detail's first sentence.

    An action that overrode a guard (--override-hazard, --skip-lint, --listen-any) is marked `!` and the option is
    named on its row."""
    from pdctl import render, state
    from pdctl.audit.records import fold_runs, line_json, parse_when, query, read_records

    log = state.audit_log_path()
    given = None if inventory is None else str(inventory)
    after = None if since is None else parse_when(since, option="--since")
    before = None if until is None else parse_when(until, option="--until")
    if after is not None and before is not None and after > before:
        from pdctl.errors import UsageError

        raise UsageError(
            f"--since {since!r} is after --until {until!r}: no record can be in between",
            hint="a time ago counts back from now: --since 3h --until 2h is from 3 hours ago to 2 hours ago",
        )
    records = read_records(log)
    if not json_out:  # -n counts what is shown: a finished run once, by its end (--json: every raw line)
        records = fold_runs(records)
    lines = query(records, action=action, result=result, inventory=given, since=after, until=before, limit=n)
    if json_out:
        render.emit_json({"log": str(log), "records": [line_json(x) for x in lines]})
    else:
        given_filters = {"--action": action, "--result": result, "--since": since, "--until": until}
        filters = [f"{k} {v!r}" for k, v in given_filters.items() if v] + ([f"-i {given}"] if given is not None else [])
        render.history_lines(lines, filters=filters, log=str(log))
