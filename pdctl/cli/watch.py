"""`pdctl watch`."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Annotated, Iterator, Optional

import typer

from pdctl.cli import complete_values
from pdctl.cli.common import InventoryOpt, JsonOpt, handle_errors, open_deployment


def exporter_address(listen: str, listen_any: bool, *, said: str | None = None, resolve=None) -> tuple[str, int]:
    """--listen (or watch.listen, `said` naming it) as the (address, port) to serve on: the address the name resolves
    to (pdctl.ops.watch_exporter.exporter_bind). Raises UsageError naming --listen or the field for a bad HOST:PORT,
    a name that does not resolve, and an address other than loopback without --listen-any."""
    from pdctl.errors import UsageError
    from pdctl.inventory import parse_listen
    from pdctl.ops.watch_exporter import bind_addresses, exporter_bind

    said = said or f"--listen {listen}"
    try:
        host, port = parse_listen(listen)
    except ValueError as e:
        raise UsageError(f"--{e}") from None
    return exporter_bind(host, port, listen_any=listen_any, said=said, resolve=resolve or bind_addresses), port


@handle_errors
def watch(
    inventory: InventoryOpt = None,
    listen: Annotated[
        Optional[str],
        typer.Option(
            "--listen",
            metavar="HOST:PORT",
            help="Serve the exporter's /metrics here. Default: the inventory's watch.listen (127.0.0.1:9464).",
        ),
    ] = None,
    listen_any: Annotated[
        bool,
        typer.Option(
            "--listen-any",
            help="Allow a --listen (or watch.listen) that resolves to an address other than loopback "
            "(the exporter has no authentication).",
        ),
    ] = False,
    timeline: Annotated[
        Optional[str],
        typer.Option(
            "--timeline",
            metavar="FILE|-",
            help="Append the verdict timeline as JSON lines to FILE (made 0600; a FIFO too; followed when rotated, "
            "SIGHUP reopens it in a service), or to stdout with - (then the screen is off).",
        ),
    ] = None,
    once: Annotated[
        bool,
        typer.Option(
            "--once",
            help="One round of every cadence (the inflight cadence until its "
            "window is full), then exit as final-health does.",
        ),
    ] = False,
    for_s: Annotated[Optional[float], typer.Option("--for", metavar="SECONDS", help="Stop after SECONDS.")] = None,
    heal: Annotated[
        str,
        typer.Option(
            "--heal",
            metavar="off|dry|on",
            autocompletion=complete_values.complete_heal,
            help="Heal the known cases (a confirmed "
            "pin, a pair broken in K canaries, the degraded bootstrap), guarded: under the lock, at most "
            "watch.heal_max_per_hour, never on an unknown host (docs/watch.md). dry: say what it would do.",
        ),
    ] = "off",
    install: Annotated[
        bool,
        typer.Option(
            "--install",
            help="Run this watch (with the --listen, --listen-any, "
            "--timeline and --heal given) as a service on this machine: a systemd unit when systemd "
            "runs it and pdctl is root, else a pidfile service; enabled and started.",
        ),
    ] = False,
    uninstall: Annotated[
        bool, typer.Option("--uninstall", help="Stop the watch service of this inventory and remove it.")
    ] = False,
    status: Annotated[
        bool,
        typer.Option(
            "--status",
            help="Is the watch service running, does its exporter answer, are its rounds recent. Exit 1 when not.",
        ),
    ] = False,
    watchdog: Annotated[
        float,
        typer.Option(
            "--watchdog",
            metavar="SECONDS",
            help="With --install under systemd: WatchdogSec, restart the watch when no round completed for that long.",
        ),
    ] = 60.0,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="With --install or --uninstall: print the unit or spec and what would be done; change nothing.",
        ),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Verify continuously: every layer on its cadence, an exporter, a timeline.

    \b
    Examples:
      pdctl watch -i prod.yaml          # on screen; /metrics on 127.0.0.1:9464
      pdctl watch --once                # one round of every check, exit 0, 1 or 3
      pdctl watch --install --heal dry  # as a service, saying what it would heal

    Runs health, inflight, e2e, pair canaries, flags and lineage on the inventory's `watch:` cadences over one
    set of connections, serves the verdicts as Prometheus metrics on --listen, and shows what is not passing.
    A host that does not answer makes its targets unknown; the rest stay watched.

    Exit (with --once or --for): 0 all pass, 1 a check fails, else 3 a target is unknown; 130 stopped by Ctrl-C
    or SIGTERM.

    As a service (docs/watch.md): --install, --status, --uninstall."""
    import math
    import sys

    from pdctl import render
    from pdctl.errors import UsageError
    from pdctl.inventory import load_inventory
    from pdctl.checks.watch_events import TimelineSink
    from pdctl.ops.watch import Hook, run_watch
    from pdctl.render.watch_screen import ChangeLines, LiveScreen, screen_text
    from pdctl.render.watch_timeline import TimelineWriter
    from pdctl.serialize import to_data
    from pdctl.services.sdnotify import Notifier

    if for_s is not None and not (math.isfinite(for_s) and for_s > 0):
        raise UsageError(f"--for {for_s:g}: must be a number of seconds > 0")
    if heal not in [mode for mode, _ in complete_values.HEAL_MODES]:
        raise UsageError(f"--heal {heal!r}: choose off, dry or on")
    inv = load_inventory(inventory)
    if not (uninstall or status):  # what the watch (or the service's) would serve, checked before anything
        said = f"--listen {listen}" if listen else f"watch.listen {inv.watch.listen} (in {inv.source})"
        serve = exporter_address(listen or inv.watch.listen, listen_any, said=said)
    if install or uninstall or status:
        if install + uninstall + status > 1:
            raise UsageError("choose one of --install, --uninstall, --status")
        return _service(
            inv,
            inventory,
            install=install,
            uninstall=uninstall,
            listen=listen,
            listen_any=listen_any,
            timeline=timeline,
            heal=heal,
            watchdog=watchdog,
            once=once,
            for_s=for_s,
            dry_run=dry_run,
            json_out=json_out,
        )
    if dry_run:
        raise UsageError("--dry-run goes with --install or --uninstall", hint="the watch itself changes nothing")
    if json_out and timeline == "-":
        raise UsageError("--json and --timeline - both want stdout", hint="write the timeline to a file")
    from pdctl.checks.watch_schedule import short_watch_warning

    sinks: list[TimelineSink] = []
    writer = TimelineWriter(timeline) if timeline else None  # refused (a link, a device) before anything is said
    if writer is not None:
        sinks.append(writer)
    short = short_watch_warning(for_s, once, inv.watch.inflight_window, inv.watch.inflight_interval)
    if short:
        render.warning(short)
    live = not json_out and timeline != "-" and not once and sys.stdout.isatty()
    if not json_out and timeline != "-" and not once and not live:
        sinks.append(ChangeLines())
    try:
        with open_deployment(inv, quiet=True) as dep, _hangup_reopens(writer):
            hooks: list[Hook] = []
            if heal != "off":
                from pdctl.ops.heal import Healer

                hooks.append(Healer(dep, dry=heal == "dry"))
            result = run_watch(
                dep,
                on_lines=sinks,
                hooks=hooks,
                for_s=for_s,
                once=once,
                serve=serve,
                screen=LiveScreen if live else None,
                notifier=Notifier.from_env(unset=True),
            )
    except KeyboardInterrupt as e:  # before its first round (connecting, binding): the watch had changed nothing
        from pdctl.cli.common import report_error
        from pdctl.errors import ExitCode

        why = getattr(e, "signal_name", None) or "SIGINT (Ctrl-C)"
        code = report_error(
            ExitCode.INTERRUPTED, f"watch stopped by {why} before its first round", None, json_out=json_out
        )
        raise typer.Exit(code) from None
    finally:
        if writer is not None:
            writer.close()
    state = result.state
    if state is None:  # run_watch always gives its state; only a WatchResult made elsewhere has none
        raise typer.Exit(result.exit_code())
    failed_outputs = [
        f"{h.name}: {h.failures} batch(es) of lines could not be written at once"
        + (f", {h.dropped_lines} line(s) dropped" if h.dropped_lines else "")
        + (f"; still failing: {h.why}" if not h.ok else "")
        for h in (result.outputs.outputs.values() if result.outputs else ())
        if h.failures
    ]
    if json_out:
        snapshot = to_data(state.snapshot(state.started + result.seconds))
        snapshot.pop("exit_code")  # the state's verdict alone: the process's own (130 when interrupted) stands
        warnings = ([short] if short else []) + failed_outputs
        render.emit_json(
            {
                "ok": result.ok,
                "exit_code": result.exit_code(),
                "seconds": round(result.seconds, 1),
                "stopped_by": result.stopped_by,
                **snapshot,
                **({"warnings": warnings} if warnings else {}),
            }
        )
    elif result.reader_gone:
        pass  # `| head -1`: its reader has what it wanted; the exit status is still the verdict
    elif timeline != "-":
        if not live:  # the live view's last frame stays on the screen
            render.console().print(screen_text(state, state.started + result.seconds))
        if result.stopped_by:
            render.console(stderr=True).print(f"watch stopped by {result.stopped_by} after {result.seconds:.0f}s")
    if not json_out:
        for said in failed_outputs:
            render.warning(said)
    code = result.exit_code()
    if code:
        raise typer.Exit(code)


@contextmanager
def _hangup_reopens(writer) -> Iterator[None]:
    """While inside, SIGHUP reopens the --timeline file (logrotate's signal) instead of stopping the watch, when
    the watch has a timeline file and no controlling terminal (a service, setsid): with one, a SIGHUP may be the
    terminal hanging up, and stops it as before. A SIGHUP the process was started ignoring (nohup) stays ignored."""
    import os
    import signal
    import threading

    def has_terminal() -> bool:
        try:
            os.close(os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY))
            return True
        except OSError:
            return False

    if (
        writer is None
        or writer.target == "-"
        or threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        or has_terminal()
    ):
        yield
        return
    previous = signal.signal(signal.SIGHUP, lambda _signum, _frame: writer.reopen())
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, previous)


def _service(
    inv,
    inventory,
    *,
    install: bool,
    uninstall: bool,
    listen,
    listen_any: bool,
    timeline,
    heal: str,
    watchdog: float,
    once: bool,
    for_s,
    dry_run: bool,
    json_out: bool,
) -> None:
    """--install / --uninstall / --status: one call each, rendered."""
    import math

    from pdctl import render
    from pdctl.errors import UsageError
    from pdctl.ops import watch_service as ops
    from pdctl.render.watch_service import watch_service_report

    status = not (install or uninstall)
    if once or for_s is not None:
        raise UsageError("--once and --for end the watch: a service runs until stopped")
    if status and dry_run:
        raise UsageError("--dry-run goes with --install or --uninstall (--status changes nothing)")
    if install and not (math.isfinite(watchdog) and watchdog >= 1):
        raise UsageError(f"--watchdog {watchdog:g}: must be at least 1 second")
    if install:
        ws = ops.install(
            inv,
            inventory,
            listen=listen,
            listen_any=listen_any,
            timeline=timeline,
            heal=heal,
            watchdog_s=watchdog,
            dry_run=dry_run,
        )
    elif uninstall:
        ws = ops.uninstall(inv, inventory, dry_run=dry_run)
    else:
        ws = ops.status(inv, inventory)
    if json_out:
        from pdctl.serialize import to_data

        render.emit_json(to_data(ws))
    else:
        watch_service_report(ws)
    if status and not ws.ok:
        from pdctl.errors import ExitCode

        raise typer.Exit(ExitCode.CHECK_FAILED)
