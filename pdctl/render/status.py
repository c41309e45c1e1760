"""What `pdctl status` prints: one row per role."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from pdctl import render


def status_table(rows: list[dict[str, Any]]) -> None:
    t = Table(title="roles", title_justify="left")
    t.add_column("role", no_wrap=True)
    t.add_column("service", no_wrap=True)
    for col in ("state", "pid", "uptime", "detail"):
        t.add_column(col)
    for r in rows:
        if r.get("error"):
            state = Text("unknown", style="yellow")   # not "stopped": the host could not be asked
        else:
            state = Text("running", style="green") if r["active"] else Text("stopped", style="red")
        up = f"{r['uptime_s']:.0f}s" if r.get("uptime_s") is not None else ""
        t.add_row(r["label"], r["service"], state, str(r["pid"] or ""), up, r.get("detail") or "")
    render.console().print(t)
