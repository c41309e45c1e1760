"""What `pdctl watch --install / --uninstall / --status` print: the verdict first, then where it runs, its pid,
its exporter, where its log goes and how to stop it."""

from __future__ import annotations

from typing import Mapping

from pdctl import render
from pdctl.render.escape_controls import Text


def _fields(ws) -> list[tuple[str, str]]:
    from pdctl.secrets import mask_argv

    exporter = ws.exporter_url
    if exporter and ws.exporter_answers is not None:
        exporter += " (answers)" if ws.exporter_answers else " (no answer)"
    rows = [
        ("unit" if ws.manager == "systemd" else "spec", ws.path),
        ("command", " ".join(mask_argv(list(ws.argv)))),
        ("exporter", exporter),
        ("log", ws.log),
    ]
    return [(k, v) for k, v in rows if v]


def _print_fields(rows: list[tuple[str, str]]) -> None:
    c = render.console()
    for k, v in rows:
        # the value wraps under itself, never cut
        c.print(Text(f"  {k + ':':<10}", style="bold") + Text(v), overflow="fold")


def watch_service_report(ws) -> None:
    c = render.console()
    where = f"{ws.name} ({ws.manager}: {ws.manager_why})"
    if ws.action == "install":
        if ws.dry_run:
            c.print(Text(f"plan: {'install' if ws.changed else 'nothing changes for'} {where}", style="bold"))
            _print_fields(_fields(ws))
            c.print(Text(f"--- {ws.path} ---"))
            c.print(Text(ws.rendered), overflow="fold")
            return
        running = f"running as pid {ws.pid}" if ws.active else f"NOT running ({ws.detail})"
        c.print(
            Text(
                f"watch service {'installed' if ws.changed else 'unchanged'}: {running}",
                style="green" if ws.active else "red",
            )
        )
        _print_fields(
            [("service", where)] + _fields(ws) + [("stop", ws.stop_with), ("status", "pdctl watch --status" + _inv(ws))]
        )
        return
    if ws.action == "uninstall":
        if ws.dry_run or not ws.changed:
            c.print(Text(f"{'plan: ' if ws.dry_run else ''}{ws.name}: {ws.detail}"))
            return
        c.print(Text(f"watch service removed: {ws.name} ({ws.manager}); {ws.detail}", style="green"))
        _print_fields([("removed", p) for p in ws.removed])
        return
    failed = [r for r in ws.checks if r.failed]
    verdict = (
        f"watch service {ws.name}: running, pid {ws.pid}"
        if not failed
        else f"watch service {ws.name}: {failed[0].name} {failed[0].observed}"
    )
    c.print(Text(verdict, style="red" if failed else "green"))
    c.print(render.check_table("watch service", ws.checks, c.width))
    _print_fields(
        [("manager", f"{ws.manager} ({ws.manager_why})")]
        + _fields(ws)
        + ([("stop", ws.stop_with)] if ws.active else [])
    )


def _inv(ws) -> str:
    argv = list(ws.argv)
    return f" -i {argv[argv.index('-i') + 1]}" if "-i" in argv[:-1] else ""


def watch_line(w: Mapping[str, str | int | None]) -> str:
    """`pdctl status`'s line about the deployment's watch service. Pure."""
    if w["state"] == "running":
        restarts = f", restarted {w['restarts']}x" if w.get("restarts") else ""
        return f"watch: {w['service']} running, pid {w['pid']} ({w['manager']}{restarts}); pdctl watch --status"
    if w["state"] == "not installed":
        return "watch: not installed (pdctl watch --install runs it as a service)"
    return f"watch: {w['service']} {w['state']}" + (f" ({w['detail']})" if w.get("detail") else "")
