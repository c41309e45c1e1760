"""What `pdctl status` prints: the verdict line, then one row per role instance (when the table does not fit, the
instance, state, pid and uptime on one line and its service and detail indented under it), then, when a router
does not route to a running worker, which and why, and the co-restart that puts it back."""

from __future__ import annotations

from pdctl import render
from pdctl.checks.role_status import RoleStatus, co_restart_advice
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
        if r.routing is not None:  # running is not serving: say which router does not route to it
            for m in r.routing.missing:
                detail += f"{', ' if detail else ''}{short_label(m.router)}: {m.why}"
            for u in r.routing.unread:
                detail += f"{', ' if detail else ''}{short_label(u.router)}: list not read"
        out.append((r.label, r.service, Text(r.state, style=STATE_STYLES[r.state]), str(r.pid or ""), up, detail))
    return out


def status_headline(rows: list[RoleStatus]) -> Text:
    """'status: 10 of 10 running', 'status: 9 of 10 running; stopped: decode[2]', 'status: 3 of 3 unknown:
    prefill[0], ...', 'status: 5 of 5 running; not routed to: prefill[0], decode[0]' (short labels, whole;
    "running" only when something runs; green only when everything runs and every router routes to every
    running worker). Pure."""
    states = [r.state for r in rows]
    parts = [f"{states.count('running')} of {len(rows)} running"] if "running" in states else []
    for word in ("stopped", "unknown"):
        names = [short_label(r.label) for r, s in zip(rows, states) if s == word]
        if names:
            parts.append(
                f"{word}: {', '.join(names)}" if parts else f"{len(names)} of {len(rows)} {word}: {', '.join(names)}"
            )
    unrouted = [short_label(r.label) for r in rows if r.routed is False]
    unsure = [short_label(r.label) for r in rows if r.routing is not None and r.routed is None]
    if unrouted:
        parts.append(f"not routed to: {', '.join(unrouted)}")
    if unsure:
        parts.append(f"routing unknown: {', '.join(unsure)}")
    head = "status: " + "; ".join(parts)
    ok = states.count("running") == len(rows) and not unrouted and not unsure
    style = "bold green" if ok else ("bold red" if "stopped" in states or unrouted else "yellow")
    return Text(head, style=style)


def routing_lines(rows: list[RoleStatus]) -> list[str]:
    """Under the table: each router that does not route to some running worker (which, and why), each router whose
    list could not be read (why), and the least disruptive co-restart that puts the workers back (the one
    `restart --rolling`'s own messages advise). [] when every router routes to every running worker. Pure."""
    out, unread = [], {}
    by_router: dict[str, list[str]] = {}
    for r in rows:
        if r.routing is None:
            continue
        for m in r.routing.missing:
            by_router.setdefault(m.router, []).append(f"{short_label(r.label)} ({m.why})")
        for u in r.routing.unread:
            unread[u.router] = u.why
    for router, names in by_router.items():
        out.append(
            f"{router} does not route to {', '.join(names)}: no request reaches "
            f"{'them' if len(names) > 1 else 'it'} although {'they run' if len(names) > 1 else 'it runs'}"
        )
    for why in unread.values():  # the reason names its router
        out.append(f"worker list not read: {why}")
    advice = co_restart_advice(rows)
    if advice is not None:
        command, refused = advice
        if refused is None:
            out.append(f"next: `{command}` restarts these workers first and puts them back (the service stays up)")
        else:
            out.append(f"next: `{command}` co-restarts everything (the service is down meanwhile): {refused}")
    return out


def status_table(rows: list[RoleStatus], step: str = "") -> None:
    """The verdict, the next command, the table (columns no row fills left out: pid and uptime when nothing
    runs), then which router does not route to what."""
    c = render.console()
    c.print(status_headline(rows))
    if step:
        render.wrapped(f"next: {step}", style="yellow")
    cells = status_rows(rows)
    used = [k for k in range(len(STATUS_COLS)) if k == 0 or any(str(r[k]) for r in cells)]
    cols = tuple(STATUS_COLS[k] for k in used)
    c.print(grid("roles", cols, [tuple(r[k] for k in used) for r in cells], c.width, narrow="stacked"))
    for line in routing_lines(rows):
        render.wrapped(line, style="red" if not line.startswith("next:") else "yellow")


def status_closing(rows: list[RoleStatus], step: str) -> None:
    """When something is wrong, the verdict's count and the next command again, last: on screen after any
    scroll ('status: 10 of 10 stopped -- next: pdctl deploy')."""
    from pdctl.render.fit_screen import closing

    if not step:
        return
    head = status_headline(rows)
    counted = head.plain.split(";", 1)[0].split(":")[:2]  # 'status', ' 9 of 10 running' (no names)
    render.wrapped(closing(":".join(counted), step), style=str(head.style))
