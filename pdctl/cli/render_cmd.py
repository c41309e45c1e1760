"""`pdctl render`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pdctl.cli import complete_values
from pdctl.cli.common import InventoryOpt, JsonOpt, ReportOpt, handle_errors
from pdctl.errors import ExitCode

RoleOpt = Annotated[
    Optional[str],
    typer.Option(
        "--role",
        autocompletion=complete_values.complete_role_or_instance,
        help="Only this role (prefill, decode, router) or instance (decode[0]).",
    ),
]


@handle_errors
def render(
    inventory: InventoryOpt = None, role: RoleOpt = None, json_out: JsonOpt = False, report: ReportOpt = None
) -> None:
    """Print what deploy would write for each role, offline: no host is contacted.

    Each role's command line, env (secrets masked), interpreter, and systemd unit or pidfile spec and launcher."""
    from pdctl import render as out
    from pdctl.render import units as render_units
    from pdctl.inventory import load_inventory
    from pdctl.ops.render_plan import render_plan
    from pdctl.serialize import to_data

    plan = render_plan(load_inventory(inventory), role=role)
    if json_out:
        out.emit_json(to_data(plan))
    else:
        render_units.render_plan(plan)
    if not plan.ok:
        raise typer.Exit(ExitCode.CHECK_FAILED)
