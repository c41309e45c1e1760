"""What `pdctl ssh` prints: the kept SSH connections of an inventory's hosts, or which `--close` ended."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pdctl import render
from pdctl.render.escape_controls import Text
from pdctl.render.layout import Col, grid

if TYPE_CHECKING:
    from pdctl.transport.control import KeptConnection

KEPT_COLS = (
    Col("host", ident=True, head=True),
    Col("state", ident=True, head=True),
    Col("pid", ident=True, right=True),
    Col("idle for", ident=True, right=True),
    Col("expires in", ident=True, right=True),
    Col("socket", ident=True),
)
_STATE_STYLE = {"kept": "green", "none": "dim", "not answering": "yellow"}


def seconds(value: float | None) -> str:
    """`42s`, `9m58s`, `2h05m`; empty for None. Pure."""
    if value is None:
        return ""
    s = int(round(value))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def state_cell(row: KeptConnection) -> Text:
    """The state of a kept connection; a keeper whose SSH connection is down (the host refused, or went away)
    says so: "kept" alone would promise a connection that is not there. Pure."""
    if row.state == "kept" and not row.connected:
        return Text("kept, not connected", style="yellow")
    return Text(row.state, style=_STATE_STYLE.get(row.state, ""))


def kept_table(rows: list[KeptConnection], directory: str) -> None:
    """One row per host; sockets by file name under the control directory, said once above the table."""
    c = render.console()
    if not rows:
        c.print("no SSH hosts in this inventory: nothing is kept")
        return
    cells = [
        (
            r.host,
            state_cell(r),
            str(r.pid or ""),
            seconds(r.idle_for),
            seconds(r.expires_in),
            os.path.basename(r.socket),
        )
        for r in rows
    ]
    c.print(Text(f"control directory: {directory}"))
    c.print(grid("kept SSH connections", KEPT_COLS, cells, c.width))
    off = [r.host for r in rows if r.keep <= 0]
    if off:
        c.print(
            Text(
                f"keeping is off for {', '.join(off)} (keep_connection 0, or PDCTL_SSH_KEEP=0): new runs "
                "connect on their own",
                style="dim",
            )
        )


_ENDED_BY = {
    "close request": "",
    "SIGTERM": ", which did not answer: ended by SIGTERM",
    "SIGKILL": ": killed (SIGKILL), SIGTERM did not end it",
    "already gone": ", which had already ended",
}


def closed_line(row: KeptConnection) -> Text:
    """What --close did for one host: ended (and how), not ended (and why), or nothing to end. Pure."""
    who = f"keeper pid {row.pid}" if row.pid else f"the keeper at {row.socket}"
    if row.closed:
        return Text(f"closed {row.host} ({who}{_ENDED_BY.get(row.ended_by or '', '')})", style="green")
    if row.problem:
        silent = " does not answer and" if row.state == "not answering" else ""
        return Text(f"{row.host}: {who}{silent} was NOT ended: {row.problem}", style="red")
    return Text(f"{row.host}: no kept connection", style="dim")


def closed_lines(rows: list[KeptConnection]) -> None:
    c = render.console()
    for r in rows:
        c.print(closed_line(r))
