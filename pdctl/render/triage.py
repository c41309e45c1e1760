"""What `pdctl triage` prints: the observations, the findings and the headline."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from pdctl import render
from pdctl.render.inflight import style_of
from pdctl.render.screen import STATUS_STYLE


def triage_report(rep) -> None:
    c = render.console()
    t = Table(title="observations", title_justify="left")
    for col in ("what", "target", "status", "observed"):
        t.add_column(col, overflow="fold")
    for o in rep.observations:
        t.add_row(o.what, o.target, Text(o.status.value.upper(), style=STATUS_STYLE[o.status]), o.observed)
    c.print(t)
    if not rep.findings:
        c.print(Text(rep.headline, style="bold green"))
        return
    for i, f in enumerate(rep.findings, 1):
        style = "bold red" if f.severity == "action" else "yellow"
        c.print(Text(f"finding {i} [{f.severity}]: {f.title}", style=style))
        for o in f.observed:
            c.print(Text(f"  observed: {o}"))
        for o in f.inferred:
            c.print(Text(f"  inferred: {o}", style="dim"))
        c.print(Text(f"  action:   {f.action}", style="bold"))
    c.print(Text(rep.headline, style=style_of(False if rep.needs_action else None)))
