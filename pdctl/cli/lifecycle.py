"""`pdctl status`, `pdctl down`, `pdctl logs`."""

from __future__ import annotations

from typing import Annotated

import typer

from pdctl.cli import complete_values
from pdctl.cli.common import DryRunOpt, InventoryOpt, JsonOpt, ReportOpt, handle_errors, open_deployment, progress_quiet

MAX_LOG_LINES = 100_000  # a bigger count overflows `tail -n` / journalctl and printed nothing


@handle_errors
def status(inventory: InventoryOpt = None, json_out: JsonOpt = False, report: ReportOpt = None) -> None:
    """Show each role's service, state, pid and uptime, and whether every router routes to each running worker.
    Exit 1 if a role is down or a router does not route to a running worker, 3/4 if a host could not be asked."""
    from pdctl import render
    from pdctl.checks.role_status import status_exit_code, status_next_step
    from pdctl.lock import LockState
    from pdctl.ops.context import lock_state
    from pdctl.ops.lifecycle import status as run
    from pdctl.ops.lifecycle import status_hazards
    from pdctl.ops.router_membership import with_router_membership
    from pdctl.ops.watch_service import brief
    from pdctl.serialize import to_data

    with open_deployment(inventory, quiet=True) as dep:
        rows = with_router_membership(dep, run(dep))  # running is not serving: a router may not route to it
        # one read of the lock; not from a host that just failed to answer (one more connect timeout for nothing)
        lock = (
            LockState(None, None)
            if any(r.state == "unknown" and r.host == dep.inv.roles.prefill[0].host for r in rows)
            else lock_state(dep)
        )
        hazards = status_hazards(dep, rows, lock.abandoned)
        held = lock.holder
        watch = brief(dep.inv)
    if json_out:
        render.emit_json(
            {
                "inventory": dep.inv.name,
                "roles": to_data(rows),
                "hazards": hazards,
                "watch": watch,
                "lock_held_by": held,
            }
        )
    else:
        step = status_next_step(rows)
        render.status_table(rows, step)
        render.lines([render.watch_line(watch)], style="dim")
        if held:  # a role restarting now is that change, not a fault
            render.wrapped(f"deployment lock held by {held}: a change is under way", style="yellow")
        for h in hazards:
            render.warning(h)
        render.status_closing(rows, step)
    # one line per host that could not be asked; each role's reason is in its row
    first_per_host: dict[str, tuple[str, str | None]] = {}
    for r in rows:
        if r.error is not None:
            first_per_host.setdefault(r.host, (r.error, r.hint))
    for message, hint in first_per_host.values():
        render.error(message, hint)
    code = status_exit_code(rows)
    if code:
        raise typer.Exit(code)


@handle_errors
def down(
    inventory: InventoryOpt = None,
    dry_run: DryRunOpt = False,
    json_out: JsonOpt = False,
    purge: Annotated[
        bool, typer.Option("--purge", help="Then remove each role's rendered spec or unit and its log.")
    ] = False,
) -> None:
    """Stop router -> decode -> prefill under the deployment lock."""
    from pdctl import render
    from pdctl.ops.lifecycle import down as run
    from pdctl.serialize import to_data

    with open_deployment(inventory, quiet=progress_quiet(json_out)) as dep:
        steps = run(dep, dry_run=dry_run, purge=purge)
    if json_out:
        render.emit_json({"dry_run": dry_run, "steps": to_data(steps)})
    elif dry_run:
        render.plan_lines(steps)
    else:
        render.console().print(render.steps_table(steps))


@handle_errors
def logs(
    role: Annotated[
        str, typer.Argument(help="prefill, decode or router", autocompletion=complete_values.complete_role)
    ],
    inventory: InventoryOpt = None,
    index: Annotated[
        int,
        typer.Option("--index", autocompletion=complete_values.complete_index, help="Which instance of the role."),
    ] = 0,
    lines: Annotated[int, typer.Option("-n", "--lines", min=1, help="How many lines from the end.")] = 200,
    report: ReportOpt = None,
) -> None:
    """Print the last lines of a role's log (journal or log file), secret env values scrubbed.

    A log file that does not exist (the role never started on its host) is said, with its path: exit 1."""
    from pdctl.errors import UsageError
    from pdctl.ops.lifecycle import logs as run
    from pdctl.render.report import record_text

    if lines > MAX_LOG_LINES:
        raise UsageError(f"-n/--lines {lines}: at most {MAX_LOG_LINES}")
    if role not in ("prefill", "decode", "router"):
        raise UsageError(f"ROLE {role!r}: choose prefill, decode or router")
    with open_deployment(inventory, quiet=True) as dep:
        text = run(dep, role, index=index, lines=lines)
    typer.echo(text, nl=not text.endswith("\n"))
    record_text(text.rstrip("\n"))  # raw text bypasses the recording console: keep it for --report
