"""`pdctl ssh`: the SSH connections kept between runs (keep_connection, $PDCTL_SSH_KEEP): list them, end them."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pdctl.cli.common import InventoryOpt, JsonOpt, handle_errors
from pdctl.errors import ExitCode


@handle_errors
def ssh(
    hosts: Annotated[
        Optional[list[str]],
        typer.Argument(
            metavar="HOST", help="Host names of the inventory (default: all its SSH hosts).", show_default=False
        ),
    ] = None,
    close: Annotated[
        bool,
        typer.Option(
            "--close",
            help="End these hosts' kept connections and say which ended (a keeper that does not answer is ended "
            "by the pid pdctl recorded: SIGTERM, then SIGKILL).",
        ),
    ] = False,
    inventory: InventoryOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List the SSH connections kept between pdctl runs: host, keeper pid, idle time, time to expiry, socket.

    A host's connection is kept when its keep_connection (or $PDCTL_SSH_KEEP, which wins: 0, or 5 to 86400) is
    above 0 seconds; it ends after that many idle seconds, or with --close. A keeper that does not answer is shown
    "not answering" and bypassed by runs (they connect directly). Exit 1 when --close could not end a keeper, 2
    for a host name the inventory does not have or a bad $PDCTL_SSH_KEEP."""
    from pdctl import render
    from pdctl.inventory import load_inventory
    from pdctl.ops.ssh_keep import close_kept, kept_connections
    from pdctl.render.ssh import closed_lines, kept_table
    from pdctl.serialize import to_data
    from pdctl.transport.control import control_dir

    inv = load_inventory(inventory)
    directory = str(control_dir())
    rows = close_kept(inv, hosts) if close else kept_connections(inv, hosts)
    if json_out:
        key = "closed" if close else "connections"
        render.emit_json({"inventory": inv.name, "control_dir": directory, key: to_data(rows)})
    elif close:
        closed_lines(rows)
    else:
        kept_table(rows, directory)
    if close and any(r.problem for r in rows):  # a keeper still runs: --close did not do what it says
        raise typer.Exit(ExitCode.CHECK_FAILED)
