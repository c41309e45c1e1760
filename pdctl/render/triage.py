"""What `pdctl triage` prints: the headline, the findings (one line per instance observed, wrapped under itself),
then the observations that did not pass as one row per kind and instance, and the passing ones counted."""

from __future__ import annotations

from rich.table import Table

from pdctl import render
from pdctl.checks.result import WORST_FIRST, Status
from pdctl.render.escape_controls import Text
from pdctl.render.inflight import style_of
from pdctl.render.layout import Col, grid, wrap_keeping_commands
from pdctl.render.screen import STATUS_STYLE

OBS_COLS = (
    Col("what", ident=True, head=True),
    Col("target", ident=True, head=True),
    Col("status", ident=True, head=True),
    Col("observed"),
)
_WORST = WORST_FIRST


def _finding_lines(f, width: int) -> Table:
    """observed / inferred / action lines of a finding, each value wrapped under itself."""
    g = Table.grid(padding=(0, 1))
    g.add_column(no_wrap=True)
    g.add_column(overflow="fold")
    rows = (
        [("observed:", o, "") for o in f.observed]
        + [("inferred:", o, "dim") for o in f.inferred]
        + [("action:", f.action, "bold")]
    )
    for label, value, style in rows:
        g.add_row(
            Text(f"  {label:<9}", style=style), Text("\n".join(wrap_keeping_commands(value, width - 12)), style=style)
        )
    return g


def grouped_observations(observations) -> list[tuple]:
    """One row per kind and target, in first-seen order: its worst status, what each observation saw. Pure."""
    by: dict[tuple[str, str], list] = {}
    for o in observations:
        by.setdefault((o.what, o.target), []).append(o)
    rows = []
    for (what, target), os_ in by.items():
        worst = min((o.status for o in os_), key=_WORST.index)
        rows.append((what, target, Text(worst.value.upper(), style=STATUS_STYLE[worst]), [o.observed for o in os_]))
    return rows


def triage_report(rep, *, verbose: bool = False) -> None:
    """The headline first, then each finding (observed, inferred, the action), then the observations that did not
    pass, and the passing ones counted per kind (every one with `verbose`)."""
    c = render.console()
    ok = True if not rep.findings else (False if rep.needs_action else None)
    c.print(Text(rep.headline, style=style_of(ok)))
    for i, f in enumerate(rep.findings, 1):
        style = "bold red" if f.severity == "action" else "yellow"
        c.print(Text(f"finding {i} [{f.severity}]: {f.title}", style=style))
        c.print(_finding_lines(f, c.width))
    shown = [o for o in rep.observations if verbose or o.status is not Status.PASS]
    if shown:
        c.print(
            grid(
                "observations" if verbose else "observations that did not pass",
                OBS_COLS,
                grouped_observations(shown),
                c.width,
                narrow="stacked",
            )
        )
    if not verbose:
        for line in passed_summary(rep.observations, c.width):
            c.print(Text(line))


def passed_summary(observations, width: int = 80) -> list[str]:
    """'passed: service 3/3, health 4/4, ...' in lines that fit `width`, kinds in first-seen order; a kind and
    its count never split. Pure."""
    seen: dict[str, list[int]] = {}
    for o in observations:
        n = seen.setdefault(o.what, [0, 0])
        n[0] += o.status is Status.PASS
        n[1] += 1
    parts = [f"{what} {p}/{t}" for what, (p, t) in seen.items() if p]
    lines, cur = [], "passed:"
    for part in parts:
        if len(cur) + len(part) + 2 > width and cur != "passed:":
            lines.append(cur.rstrip(","))
            cur = "       "
        cur += f" {part},"
    if parts:
        lines.append(cur.rstrip(","))
    return lines
