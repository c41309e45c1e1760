"""Pick a transport for an inventory host (through the kinds registry), and keep one per host for the length of a
command."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Mapping

from pdctl.transport.base import Transport

if TYPE_CHECKING:
    from pdctl.inventory import Host


def connect(name: str, host: Host, *, eager: bool = False) -> Transport:
    """A Transport for the inventory host `name`, made by its kind (kinds.py).

    A remote kind connects lazily on first use unless `eager` (then UnreachableError / HostKeyRefused are raised
    here). UsageError when $PDCTL_SSH_KEEP is no number of seconds (an SSH host).
    """
    from pdctl.transport.kinds import transport_kind

    t = transport_kind(host).connect(name, host)
    if eager:
        t.open()
    return t


def _prepare_match_exec(ssh_hosts: list) -> None:
    """paramiko is imported once per process, with invoke only when an ssh_config needs it (`Match exec`): so
    before any host connects (in parallel, in any order), any SSH host's ssh_config that has such a line has
    paramiko imported with invoke. A file that is missing or no text file (a FIFO, a device: refused unopened by
    safe_read) is left to the host's own connect to report."""
    import os

    from pdctl.errors import UsageError
    from pdctl.safe_read import read_input_text

    for h in ssh_hosts:
        if h.ssh_config == "none":
            continue
        try:
            text = read_input_text(os.path.expanduser(h.ssh_config or "~/.ssh/config"), UsageError, "ssh_config")
        except UsageError:
            continue
        if "exec" not in text.lower():  # no `Match exec`: nothing of paramiko's is loaded here (a kept run needs none)
            continue
        from pdctl.transport.paramiko_import import import_paramiko, needs_match_exec

        if needs_match_exec(text):
            import_paramiko(with_invoke=True)
            return


class TransportPool:
    """One transport per host name, created on first `get`, closed together by `close()` (or the with-block).

    Thread-safe: parallel checks on the same host share one connection.
    """

    def __init__(self, hosts: Mapping[str, Host] | None = None):
        from pdctl.inventory_hosts import SshHost

        self.hosts = dict(hosts or {})
        ssh_hosts = [h for h in self.hosts.values() if isinstance(h, SshHost)]
        if ssh_hosts:  # a bad $PDCTL_SSH_KEEP stops us before any step
            from pdctl.transport.control import keep_seconds

            for h in ssh_hosts:
                keep_seconds(h)
            _prepare_match_exec(ssh_hosts)
        self._transports: dict[str, Transport] = {}
        self._lock = threading.Lock()

    def get(self, name: str, host: Host | None = None) -> Transport:
        with self._lock:
            t = self._transports.get(name)
            if t is None:
                if host is None:
                    try:
                        host = self.hosts[name]
                    except KeyError:
                        raise KeyError(f"unknown host {name!r}") from None
                t = self._transports[name] = connect(name, host)
            return t

    __getitem__ = get

    def close(self) -> None:
        """Close every transport; safe to call twice."""
        with self._lock:
            transports, self._transports = list(self._transports.values()), {}
        for t in transports:
            try:
                t.close()
            except Exception:
                pass

    close_all = close

    def __enter__(self) -> "TransportPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
