"""What `pdctl triage` prints: the observations, the findings and the headline."""

from __future__ import annotations

from rich.text import Text

from pdctl import render
from pdctl.checks.result import Status
from pdctl.render.inflight import style_of
from pdctl.render.layout import Col, grid
from pdctl.render.screen import STATUS_STYLE


OBS_COLS = (Col("what", head=True), Col("target", ident=True, head=True), Col("status", ident=True, head=True),
            Col("observed"))


def triage_report(rep, *, verbose: bool = False) -> None:
    """The headline first, then each finding (observed, inferred, the action), then the observations that did not
    pass, and the passing ones counted per kind (every one with `verbose`)."""
    c = render.console()
    ok = True if not rep.findings else (False if rep.needs_action else None)
    c.print(Text(rep.headline, style=style_of(ok)))
    for i, f in enumerate(rep.findings, 1):
        style = "bold red" if f.severity == "action" else "yellow"
        c.print(Text(f"finding {i} [{f.severity}]: {f.title}", style=style))
        for o in f.observed:
            c.print(Text(f"  observed: {o}"))
        for o in f.inferred:
            c.print(Text(f"  inferred: {o}", style="dim"))
        c.print(Text(f"  action:   {f.action}", style="bold"))
    shown = [o for o in rep.observations if verbose or o.status is not Status.PASS]
    rows = [(o.what, o.target, Text(o.status.value.upper(), style=STATUS_STYLE[o.status]), o.observed)
            for o in shown]
    if rows:
        c.print(grid("observations" if verbose else "observations that did not pass", OBS_COLS, rows, c.width))
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
