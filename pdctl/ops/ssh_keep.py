"""The SSH connections kept between pdctl runs for an inventory's hosts (`pdctl ssh`): which exist, and ending them.

Only gathers, asks and ends: a keeper is found at its host's socket (control.kept_paths) and asked for its state or
to close; one that does not answer (stopped, wedged) is described and ended from pdctl's record of its pid
(keeper_pid.py), never from a pid it would have to tell. Nothing here starts a keeper or connects to a host.
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
END_WAIT_S = 8.0  # a closing keeper gets this long to exit (it gives running requests 5 s); then SIGKILL
KILL_WAIT_S = 3.0  # after SIGKILL, how long until a process that is still there is reported as not ended


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
    from pdctl.transport.kept import KeeperSilent, ask_keeper

    host = _ssh_host(inv, name)
    paths = kept_paths(name, host)
    seen = KeptConnection(host=name, socket=paths.socket, keep=keep_seconds(host), state="none")
    try:
        info = ask_keeper(paths.socket, {"op": op}, ASK_TIMEOUT_S)
    except (KeeperSilent, TimeoutError, ConnectionError):
        return _from_record(seen, paths.record)
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


def _from_record(seen: KeptConnection, record_path: str) -> KeptConnection:
    """A keeper that does not answer, as pdctl recorded it: its pid (when that process is still that keeper)
    and the time since a client last got a word from it, against the keep setting."""
    import time

    from pdctl.transport.keeper_pid import not_that_keeper, read_record

    record = read_record(record_path)
    seen = replace(seen, state="not answering")
    if record is None or not_that_keeper(record) is not None:
        return seen
    silent = max(0.0, time.time() - record.seen)
    return replace(seen, pid=record.pid, idle_for=round(silent, 3), expires_in=round(max(0.0, seen.keep - silent), 3))


def kept_connections(inv: Inventory, names: list[str] | None = None) -> list[KeptConnection]:
    """The kept connection of each named SSH host (default: all), `none` where no keeper runs."""
    return [_ask(inv, n, "info") for n in ssh_hosts(inv, names)]


def close_kept(inv: Inventory, names: list[str] | None = None) -> list[KeptConnection]:
    """End each named host's keeper (default: every SSH host's) and say which ended: asked to close, then, if it
    does not answer or is still running after END_WAIT_S, by its recorded pid (SIGTERM with SIGCONT, then
    SIGKILL). A row's `closed` is True only when its process is gone; `problem` says why one was not ended.
    A host without a keeper is left as `none`."""
    return [_close(inv, n) for n in ssh_hosts(inv, names)]


def _close(inv: Inventory, name: str) -> KeptConnection:
    from pdctl.transport.keeper_pid import end_keeper, read_record

    c = _ask(inv, name, "close")
    if c.state == "none":
        return c
    if c.state == "kept" and c.pid and _ended(c.pid, END_WAIT_S):
        return replace(c, closed=True, ended_by="close request")
    record = read_record(kept_paths(name, _ssh_host(inv, name)).record)
    if record is None or c.pid != record.pid:  # a silent keeper's pid comes from the record, when it still holds
        why = (
            "pdctl has no record of its pid"
            if record is None
            else f"pdctl's record (pid {record.pid}) does not name the keeper behind its socket"
        )
        return replace(c, problem=f"{why}: nothing signalled; end the process listening on {c.socket} (ss -xlp)")
    # a keeper that answered was given END_WAIT_S already: it gets SIGKILL at once
    ending = end_keeper(record, term_wait=END_WAIT_S if c.state != "kept" else 0.0, kill_wait=KILL_WAIT_S)
    if ending.ended:
        return replace(c, closed=True, ended_by=ending.how)
    return replace(c, problem=ending.why)


def _ended(pid: int, limit: float) -> bool:
    """Whether process `pid` is gone within `limit` s (a zombie left for init to reap counts as gone)."""
    from pdctl.poll import poll_until
    from pdctl.transport.keeper_pid import start_time

    return poll_until(
        lambda: start_time(pid) is not None,
        lambda running: not running,
        timeout=limit,
        interval=0.05,
        timeout_name="keeper exit wait",
    ).ok
