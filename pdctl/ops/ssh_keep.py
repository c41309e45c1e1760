"""The SSH connections kept between pdctl runs for an inventory's hosts (`pdctl ssh`): which exist, and ending them.

Only gathers and asks: a keeper is found at its host's socket (control.kept_paths) and asked for its state or to
close; nothing here starts one or connects to a host.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pdctl.errors import UsageError
from pdctl.transport.control import KeptConnection, keep_seconds, kept_paths

if TYPE_CHECKING:
    from pdctl.inventory import Inventory
    from pdctl.inventory_hosts import SshHost

ASK_TIMEOUT_S = 5.0
END_WAIT_S = 8.0  # a closing keeper gets this long to exit (it gives running requests 5 s)


def ssh_hosts(inv: Inventory, names: list[str] | None) -> list[str]:
    """`names` (default: every SSH host of the inventory), checked: UsageError (exit 2) for a name the inventory
    does not have or a host that is not reached over SSH."""
    from pdctl.inventory_hosts import SshHost

    if not names:
        return [n for n, h in inv.hosts.items() if isinstance(h, SshHost)]
    return [n for n in dict.fromkeys(names) if _ssh_host(inv, n)]


def _ssh_host(inv: Inventory, name: str) -> SshHost:
    """The inventory's SSH host `name`; UsageError for a name it does not have or a host of another transport."""
    from pdctl.inventory_hosts import SshHost

    if name not in inv.hosts:
        raise UsageError(f"unknown host {name!r} in {inv.source} (hosts: {', '.join(sorted(inv.hosts))})")
    host = inv.hosts[name]
    if not isinstance(host, SshHost):
        raise UsageError(f"host {name!r} uses transport {host.transport}: only SSH connections are kept")
    return host


def _ask(inv: Inventory, name: str, op: str) -> KeptConnection:
    from pdctl.transport.kept import ask_keeper

    host = _ssh_host(inv, name)
    paths = kept_paths(name, host)
    seen = KeptConnection(host=name, socket=paths.socket, keep=keep_seconds(host), state="none")
    try:
        info = ask_keeper(paths.socket, {"op": op}, ASK_TIMEOUT_S)
    except (TimeoutError, ConnectionError):
        return replace(seen, state="not answering")
    if not isinstance(info, dict):
        return seen
    return replace(
        seen,
        state="kept",
        pid=info.get("pid"),
        target=info.get("target"),
        connected=bool(info.get("connected")),
        idle_for=info.get("idle_for"),
        expires_in=info.get("expires_in"),
    )


def kept_connections(inv: Inventory, names: list[str] | None = None) -> list[KeptConnection]:
    """The kept connection of each named SSH host (default: all), `none` where no keeper runs."""
    return [_ask(inv, n, "info") for n in ssh_hosts(inv, names)]


def close_kept(inv: Inventory, names: list[str] | None = None) -> list[KeptConnection]:
    """Ask each named host's keeper to end (default: every SSH host's), and wait (bounded) until its process is
    gone; `closed` says which ended. A host without a keeper is left as `none`."""
    out = []
    for n in ssh_hosts(inv, names):
        c = _ask(inv, n, "close")
        if c.state == "kept" and c.pid:
            c = replace(c, closed=_ended(c.pid, END_WAIT_S))
        out.append(c)
    return out


def _ended(pid: int, limit: float) -> bool:
    from pdctl.poll import poll_until

    return poll_until(
        lambda: process_running(pid),
        lambda running: not running,
        timeout=limit,
        interval=0.05,
        timeout_name="keeper exit wait",
    ).ok


def process_running(pid: int) -> bool:
    """Whether process `pid` exists and is no zombie (an ended keeper is nobody's child until init reaps it)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return False
