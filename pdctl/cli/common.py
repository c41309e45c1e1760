"""What every command shares: the inventory option, the JSON flag, and the one place errors become exit codes."""

from __future__ import annotations

import functools
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Callable, Iterator, Optional

import typer

InventoryOpt = Annotated[
    Optional[Path],
    typer.Option("-i", "--inventory", help="Inventory YAML. Without it: the embedded default (bundled engine on this machine).",
                 envvar="PDCTL_INVENTORY"),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout and nothing else.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")]


INTERRUPTED_EXIT = 130   # whatever the signal (Ctrl-C, SIGTERM, SIGHUP): the message and the audit record name it
_STOP_SIGNALS = ("SIGTERM", "SIGHUP")


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread like Ctrl-C so the same clean-up runs (the lock is released,
    the audit record says "interrupted by SIGTERM"). `signal_name` names the signal."""

    def __init__(self, signal_name: str):
        super().__init__(f"interrupted by {signal_name}")    # what a progress step shows as the failure
        self.signal_name = signal_name


def _raise_interrupted(signum, _frame) -> None:
    import signal

    raise Interrupted(signal.Signals(signum).name)


@contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise Interrupted in the main thread (as SIGINT raises
    KeyboardInterrupt); the previous handlers come back after. A no-op outside the main thread."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = [getattr(signal, n) for n in _STOP_SIGNALS if hasattr(signal, n)]
    previous = {s: signal.signal(s, _raise_interrupted) for s in sigs}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def handle_errors(fn: Callable) -> Callable:
    """Run a command; map PdctlError to its exit code with a clear message and no traceback. Ctrl-C, SIGTERM and
    SIGHUP stop it the same way: clean-up runs as the exception unwinds, then "interrupted by SIGTERM", exit 130."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from pdctl.errors import PdctlError

        try:
            with stop_signals_interrupt():
                return fn(*args, **kwargs)
        except PdctlError as e:
            from pdctl import render

            render.error(e.message, e.hint)
            raise typer.Exit(e.exit_code) from None
        except KeyboardInterrupt as e:
            from pdctl import render

            render.error(f"interrupted by {getattr(e, 'signal_name', None) or 'SIGINT (Ctrl-C)'}",
                         "it stopped at a safe point: a mutating action released its lock and recorded where "
                         "it stopped (see `pdctl history` and `pdctl status`)")
            raise typer.Exit(INTERRUPTED_EXIT) from None
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except Exception as e:  # a bug or an unmapped failure: say what happened, exit 1, no traceback
            import os
            import traceback

            from pdctl import render

            if os.environ.get("PDCTL_DEBUG"):
                traceback.print_exc()
            render.error(f"unexpected {type(e).__name__}: {e}",
                         "this is a pdctl bug or an unmapped failure; rerun with PDCTL_DEBUG=1 for the traceback")
            raise typer.Exit(1) from None

    return wrapper


def open_deployment(inventory, *, quiet: bool = False):
    """Open a Deployment whose progress goes to stderr, from an inventory path (None: the embedded default) or an
    already loaded Inventory."""
    from pdctl import render
    from pdctl.inventory import Inventory, load_inventory
    from pdctl.ops.context import Deployment
    from pdctl.progress import Progress

    inv = inventory if isinstance(inventory, Inventory) else load_inventory(inventory)
    return Deployment(inv, Progress(sink=render.ProgressPrinter(quiet=quiet)))
