"""What every command shares: the inventory option, the JSON flag, and the one place errors become exit codes."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Callable, Optional

import typer

InventoryOpt = Annotated[
    Optional[Path],
    typer.Option("-i", "--inventory", help="Inventory YAML. Without it: the embedded default (bundled engine on this machine).",
                 envvar="PDCTL_INVENTORY"),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout and nothing else.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")]


def handle_errors(fn: Callable) -> Callable:
    """Run a command; map PdctlError to its exit code with a clear message and no traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from pdctl.errors import PdctlError

        try:
            return fn(*args, **kwargs)
        except PdctlError as e:
            from pdctl import render

            render.error(e.message, e.hint)
            raise typer.Exit(e.exit_code) from None
        except KeyboardInterrupt:
            from pdctl import render

            render.error("interrupted")
            raise typer.Exit(130) from None
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
