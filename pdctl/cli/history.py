"""`pdctl history`: the audit log (every mutating action and playbook run), newest last."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pdctl.cli.common import JsonOpt, handle_errors


@handle_errors
def history(
    json_out: JsonOpt = False,
    n: Annotated[int, typer.Option("-n", "--lines", min=1, help="Show the last N records.")] = 20,
    action: Annotated[Optional[str], typer.Option(
        "--action", help="Only records of this action: exact ('run final-health') or its first word ('run').")] = None,
) -> None:
    """Show the audit log: time, operator, action, result, duration. Corrupt lines are shown as such."""
    from pdctl import audit, render, render_playbook, state

    records = list(audit.read())
    if action:
        records = [r for r in records if "corrupt" in r or r.get("action") == action
                   or str(r.get("action", "")).startswith(action + " ")]
    records = records[-n:]
    if json_out:
        render.emit_json({"log": str(state.audit_log_path()), "records": records})
    else:
        render_playbook.history(records)
