"""`pdctl ssh`: the SSH connections kept between runs (keep_connection, $PDCTL_SSH_KEEP): list them, end them."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pdctl.cli.common import InventoryOpt, JsonOpt, handle_errors


@handle_errors
def ssh(
    hosts: Annotated[
        Optional[list[str]],
        typer.Argument(
            metavar="HOST", help="Host names of the inventory (default: all its SSH hosts).", show_default=False
        ),
    ] = None,
    close: Annotated[
        bool, typer.Option("--close", help="End these hosts' kept connections and say which ended.")
    ] = False,
    inventory: InventoryOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List the SSH connections kept between pdctl runs: host, keeper pid, idle time, time to expiry, socket.

    A host's connection is kept when its keep_connection (or $PDCTL_SSH_KEEP, which wins) is above 0 seconds; it
    ends after that many idle seconds, or with --close. Exit 2 for a host name the inventory does not have."""
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
