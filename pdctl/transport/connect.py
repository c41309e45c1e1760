"""Pick a transport for an inventory host, and keep one per host for the length of a command."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from pdctl.transport.base import Transport

if TYPE_CHECKING:
    from pdctl.inventory import Host


def connect(name: str, host: Host, *, eager: bool = False) -> Transport:
    """A Transport for the inventory host `name`.

    SSH connects lazily on first use unless `eager` (then UnreachableError / HostKeyRefused are raised here). With
    keep_connection (or $PDCTL_SSH_KEEP) > 0 the connection is a keeper's, kept between runs (kept.py); then
    paramiko is not even imported here. UsageError when $PDCTL_SSH_KEEP is no number of seconds.
    """
    if host.transport == "local":
        from pdctl.transport.local import LocalTransport

        return LocalTransport(name)
    from pdctl.transport.control import keep_seconds

    keep = keep_seconds(host)
    if keep > 0:
        from pdctl.transport.kept import KeptTransport

        t: Transport = KeptTransport(name, host, keep)
    else:
        from pdctl.transport.ssh import SshTransport

        t = SshTransport(name, host)
    if eager:
        t.open()
    return t


class TransportPool:
    """One transport per host name, created on first `get`, closed together by `close()` (or the with-block).

    Thread-safe: parallel checks on the same host share one connection.
    """

    def __init__(self, hosts: dict[str, Host] | None = None):
        self.hosts = dict(hosts or {})
        if any(h.transport == "ssh" for h in self.hosts.values()):  # a bad $PDCTL_SSH_KEEP stops us before any step
            from pdctl.transport.control import keep_seconds

            for h in self.hosts.values():
                keep_seconds(h)
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
