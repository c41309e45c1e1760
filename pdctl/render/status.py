"""What `pdctl status` prints: the verdict line, then one row per role instance (when the table does not fit, the
instance, state, pid and uptime on one line and its service and detail indented under it)."""

from __future__ import annotations

from pdctl import render
from pdctl.checks.role_status import RoleStatus
from pdctl.checks.triage import short_label
from pdctl.render.escape_controls import Text
from pdctl.render.layout import Col, grid

# the head columns make a stacked row's first line: an instance's label and state are never apart
STATUS_COLS = (
    Col("role", ident=True, head=True),
    Col("service", ident=True),
    Col("state", ident=True, head=True),
    Col("pid", ident=True, right=True, head=True),
    Col("uptime", ident=True, head=True),
    Col("detail"),
)


STATE_STYLES = {"unknown": "yellow", "running": "green", "stopped": "red"}


def status_rows(rows: list[RoleStatus]) -> list[tuple[str, str, Text, str, str, str]]:
    out = []
    for r in rows:
        up = f"{r.uptime_s:.0f}s" if r.uptime_s is not None else ""
        detail = r.detail
        if detail == r.state:  # the pidfile manager's "running" says nothing the state column does not
            detail = ""
        if r.restarts:  # restarts systemd made on its own: the lineage layer says whether they matter
            detail += f"{', ' if detail else ''}NRestarts={r.restarts}"
        out.append((r.label, r.service, Text(r.state, style=STATE_STYLES[r.state]), str(r.pid or ""), up, detail))
    return out


def status_headline(rows: list[RoleStatus]) -> Text:
    """'status: 10 of 10 running', 'status: 9 of 10 running; stopped: decode[2]', 'status: 3 of 3 unknown:
    prefill[0], ...' (short labels, whole; "running" only when something runs). Pure."""
    states = [r.state for r in rows]
    parts = [f"{states.count('running')} of {len(rows)} running"] if "running" in states else []
    for word in ("stopped", "unknown"):
        names = [short_label(r.label) for r, s in zip(rows, states) if s == word]
        if names:
            parts.append(
                f"{word}: {', '.join(names)}" if parts else f"{len(names)} of {len(rows)} {word}: {', '.join(names)}"
            )
    head = "status: " + "; ".join(parts)
    ok = states.count("running") == len(rows)
    style = "bold green" if ok else ("bold red" if "stopped" in states else "yellow")
    return Text(head, style=style)


def status_table(rows: list[RoleStatus]) -> None:
    c = render.console()
    c.print(status_headline(rows))
    c.print(grid("roles", STATUS_COLS, status_rows(rows), c.width, narrow="stacked"))
