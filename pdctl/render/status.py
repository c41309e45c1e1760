"""What `pdctl status` prints: one row per role (one block per role when the table does not fit)."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from pdctl import render
from pdctl.render.layout import Col, grid

STATUS_COLS = (Col("role", ident=True, head=True), Col("service", ident=True, head=True),
               Col("state", ident=True, head=True), Col("pid", ident=True, right=True), Col("uptime", ident=True),
               Col("detail"))


def status_rows(rows: list[dict[str, Any]]) -> list[tuple]:
    out = []
    for r in rows:
        if r.get("error"):
            state = Text("unknown", style="yellow")   # not "stopped": the host could not be asked
        else:
            state = Text("running", style="green") if r["active"] else Text("stopped", style="red")
        up = f"{r['uptime_s']:.0f}s" if r.get("uptime_s") is not None else ""
        detail = r.get("detail") or ""
        if r.get("restarts"):   # restarts systemd made on its own: the lineage layer says whether they matter
            detail += f"{', ' if detail else ''}NRestarts={r['restarts']}"
        out.append((r["label"], r["service"], state, str(r["pid"] or ""), up, detail))
    return out


def status_table(rows: list[dict[str, Any]]) -> None:
    c = render.console()
    c.print(grid("roles", STATUS_COLS, status_rows(rows), c.width))
