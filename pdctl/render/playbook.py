"""Printing for `pdctl run` and `pdctl history`: the plan, a line per step as it starts and ends, the summary,
and the audit log table. The only place these commands print."""

from __future__ import annotations

from typing import Any

from pdctl import render
from pdctl.playbook.vars import show_value
from pdctl.render.escape_controls import Text
from pdctl.render.layout import Col, grid
from pdctl.render.progress import clear_live

# a table when it fits, else a block per step: a step's name, action and status are never cut
PLAN_COLS = (
    Col("#", ident=True, right=True, head=True),
    Col("step", ident=True, head=True),
    Col("does"),
    Col("gate"),
    Col("on failure"),
    Col("runs"),
)
RUN_COLS = (
    Col("#", ident=True, right=True, head=True),
    Col("step", ident=True, head=True),
    Col("action", ident=True, head=True),
    Col("status", ident=True, head=True),
    Col("seconds", ident=True, right=True),
    Col("gate"),
    Col("result"),
)

_STATUS_STYLE = {
    "passed": "green",
    "recovered": "yellow",
    "failed": "bold red",
    "skipped": "dim",
    "not run": "dim",
    "interrupted": "bold yellow",
}


def _show_gate_value(v: Any) -> str:
    return " or ".join(map(show_value, v)) if isinstance(v, list) else show_value(v)


def plan(p, *, stderr: bool = False) -> None:
    """The steps before a run starts (and the whole output of --dry-run). Secret values are scrubbed (the step
    commands come scrubbed; a gate is the playbook's text and may quote one)."""
    from pdctl.secrets import mask_text

    c = render.console(stderr=stderr)
    pb = p.playbook
    c.print(Text(f"playbook {pb.name}", style="bold") + Text(f"  ({pb.source})", style="dim"))
    if pb.description:
        c.print(Text(pb.description.strip().splitlines()[0], style="dim"))
    c.print(Text(f"inventory: {p.inventory}   apply: {'yes' if p.apply else 'no'}", style="dim"))
    if p.vars:
        c.print(Text("vars: " + " ".join(f"{k}={show_value(v)}" for k, v in p.vars.items()), style="dim"))
    rows = []
    for s in p.steps:
        gate = (
            mask_text(", ".join(f"{k}: {_show_gate_value(v)}" for k, v in s.spec.gate.items()), p.secrets)
            or "action ok"
        )
        if s.spec.handler:
            runs = Text("as handler" + ("" if s.runs else f"; {s.skip_reason}"), style="yellow" if s.runs else "dim")
        else:
            runs = Text("yes", style="green") if s.runs else Text(f"no: {s.skip_reason}", style="dim")
        rows.append((str(s.index), s.spec.name, s.describe, gate, s.spec.on_failure_text, runs))
    c.print(grid("plan", PLAN_COLS, rows, c.width))


class StepPrinter:
    """Hooks for the runner: one line when a step starts, one with its result and gate verdict when it ends."""

    def __init__(self, total: int, *, quiet: bool = False):
        self.c = render.console(stderr=True)
        self.total = total
        self.quiet = quiet

    def started(self, step, handler_of) -> None:
        if self.quiet:
            return
        clear_live()  # this console was taken before the step's progress drew a live line
        via = f" (handler of {handler_of})" if handler_of else ""
        self.c.print(
            Text(f"==> step {step.index}/{self.total} {step.spec.name}{via}: ", style="bold cyan") + Text(step.describe)
        )

    def finished(self, run) -> None:
        if self.quiet:
            return
        clear_live()
        style = _STATUS_STYLE.get(run.status, "")
        head = Text(f"<== step {run.index}/{self.total} {run.name}: ", style="bold") + Text(
            run.status.upper(), style=style
        )
        if run.status in ("skipped", "not run"):
            self.c.print(head + Text(f"  {run.note}", style="dim"))
            return
        self.c.print(head + Text(f" ({run.duration_s:.1f}s)  gate: {run.gate_brief or run.gate}"))
        if run.outcome and run.outcome.summary:
            self.c.print(Text(f"    {run.outcome.summary}", style="dim"))
        if run.outcome and run.outcome.exit_status is not None and run.status == "failed":
            for line in (run.outcome.stdout + run.outcome.stderr).strip().splitlines()[-5:]:
                self.c.print(Text(f"    | {line}", style="dim"))


def summary(result) -> None:
    c = render.console()
    rows = []
    for s in result.steps:
        name = s.name + (f" (handler of {s.handler_of})" if s.handler_of else "")
        rows.append(
            (
                str(s.index),
                name,
                s.action,
                Text(s.status, style=_STATUS_STYLE.get(s.status, "")),
                f"{s.duration_s:.1f}" if s.status not in ("skipped", "not run") else "",
                s.gate_brief or s.gate,
                s.summary,
            )
        )
    c.print(grid(f"run {result.plan.playbook.name}", RUN_COLS, rows, c.width))
    health = result.health_by_layer()
    if health is not None:
        # every layer any step checked (layers 1-2 of one step, 3-5 of the next, ...), each check's row: `pdctl run`
        # is the record of a change window
        render.health_report(health, verbose=True)
    for r in result.recommendations:
        c.print(Text("recommendation: ", style="yellow") + Text(r))
    if result.ok:
        c.print(Text(f"playbook {result.plan.playbook.name}: PASS", style="bold green"))
    elif result.interrupted:
        c.print(
            Text(
                f"playbook {result.plan.playbook.name}: INTERRUPTED (exit {result.exit_code}) - "
                f"{result.outcome_text}; no handler or later step was run",
                style="bold yellow",
            )
        )
    else:
        c.print(
            Text(
                f"playbook {result.plan.playbook.name}: FAIL (exit {result.exit_code}) - {result.outcome_text}",
                style="bold red",
            )
        )
