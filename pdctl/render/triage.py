"""What `pdctl triage` prints: the observations, the findings and the headline."""

from __future__ import annotations

from rich.text import Text

from pdctl import render
from pdctl.render.inflight import style_of
from pdctl.render.layout import Col, grid
from pdctl.render.screen import STATUS_STYLE


OBS_COLS = (Col("what", head=True), Col("target", ident=True, head=True), Col("status", ident=True, head=True),
            Col("observed"))


def triage_report(rep) -> None:
    """The headline first, then each finding (observed, inferred, the action), then every observation."""
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
    rows = [(o.what, o.target, Text(o.status.value.upper(), style=STATUS_STYLE[o.status]), o.observed)
            for o in rep.observations]
    c.print(grid("observations", OBS_COLS, rows, c.width))
