"""What `pdctl restart --rolling` prints: the verdict first, one row per unit (its decodes, its state, its steps and
seconds, what is still out of the routers), where it stopped and every role's state then, what it left each worker
as, then final-health. The steps themselves (30 for a 2x2) are in `--json`; the screen keeps one row per unit."""

from __future__ import annotations

from pdctl import render
from pdctl.render.escape_controls import Text
from pdctl.render.layout import Col, grid


def verdict_line(result) -> Text:
    done = sum(1 for u in result.units if u.state == "done")
    n = len(result.units)
    if result.dry_run:
        return Text(f"restart --rolling: PLAN ({n} units; nothing was changed)", style="bold")
    if result.stopped:
        return Text(f"restart --rolling: STOPPED ({done} of {n} units done)", style="bold red")
    if result.health is not None and not result.health.ok:
        return Text(f"restart --rolling: FAIL ({n} of {n} units done; final-health failed)", style="bold red")
    return Text(
        f"restart --rolling: OK ({n} of {n} units done; every router kept a prefill and a decode)", style="bold green"
    )


def unit_rows(result) -> tuple[tuple[Col, ...], list[list[str]]]:
    """One row per unit. Pure."""
    cols = (
        Col("unit", ident=True, head=True),
        Col("decodes", ident=True),
        Col("state"),
        Col("steps", right=True),
        Col("seconds", right=True),
        Col("out of routers"),
    )
    rows = []
    for u in result.units:
        mine = [s for s in result.steps if s.step.startswith(f"{u.unit.name}:")]
        rows.append(
            [
                u.unit.name,
                ", ".join(f"decode[{j}]" for j in u.unit.decodes),
                u.state,
                str(len(mine)),
                f"{sum(s.seconds for s in mine):.1f}",
                ", ".join(u.out or []) or "-",
            ]
        )
    return cols, rows


def rolling_report(result) -> None:
    c = render.console()
    c.print(verdict_line(result))
    if result.order:
        c.print(Text(f"  order: {result.order}", style="dim"))
    for w in result.warnings:
        render.warning(w)
    if result.dry_run:
        render.plan_lines(result.plan)
        return
    c.print(
        Text(
            f"  {len(result.steps)} steps in {sum(s.seconds for s in result.steps):.1f}s; each unit "
            "restarts every prefill in turn, then its decodes",
            style="dim",
        )
    )
    cols, rows = unit_rows(result)
    c.print(grid("units", cols, rows, c.width))
    for u in result.units:
        if u.detail:
            c.print(Text(f"{u.unit.name}: {u.detail}", style="red"))
    if result.stopped:
        c.print(Text(result.stopped))
        for line in result.left:
            c.print(Text(line))
        c.print(
            Text("next: ", style="yellow")
            + Text(
                "fix the cause, then `pdctl restart --rolling` again: it restarts the workers left out of the "
                "routers first and puts them back (the service stays up)"
            )
        )
    if result.health:
        render.health_report(result.health)
