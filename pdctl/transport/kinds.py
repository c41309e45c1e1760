"""The transport kinds: a small registry, one `TransportKind` per value of an inventory host's `transport`.

A kind names its inventory model (a `Host` subclass in pdctl/inventory_hosts.py, whose tag is the kind's name), how
to connect (returns a `Transport`, base.py's contract), whether its commands run on this machine, and the routes its
hosts' HTTP may take (`direct` to the role's address, or a `tunnel` through the transport). Callers ask the host
(`host.runs_here`, `host.http_route`) or this registry (`transport_kind(host).connect(...)`), never compare
`host.transport` to a string.

Where a new kind goes: its model in inventory_hosts.py (in `AnyHost` and `HOST_TYPES`), its Transport in a module
here (imported lazily by its `connect`), one `register(TransportKind(...))` below, its fields in docs/inventory.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Union

from pdctl.inventory_hosts import Host, HttpRoute, LocalHost, SshHost

if TYPE_CHECKING:
    from pdctl.transport.base import Transport


@dataclass(frozen=True)
class TransportKind:
    name: str  # the inventory's `transport:` (the tag of `host_type`)
    host_type: type[Host]  # the inventory model of its hosts
    connect: Callable[[str, Any], "Transport"]  # (host name, host of host_type) -> a Transport; connects lazily
    http_routes: tuple[HttpRoute, ...]  # the routes its hosts' HTTP may take; a host says which (`http_route`)
    summary: str  # one line for the docs and messages

    @property
    def runs_here(self) -> bool:
        """Whether commands run on this machine (nothing to connect to or check, this interpreter, local state)."""
        return self.host_type.runs_here


_KINDS: dict[str, TransportKind] = {}


def register(kind: TransportKind) -> TransportKind:
    """Add a transport kind; its name must be its host model's tag (the inventory tells hosts apart by it)."""
    if kind.host_type.__struct_config__.tag != kind.name:
        raise ValueError(
            f"transport kind {kind.name!r}: its host model is tagged {kind.host_type.__struct_config__.tag!r}"
        )
    _KINDS[kind.name] = kind
    return kind


def transport_kinds() -> dict[str, TransportKind]:
    """name -> TransportKind of every registered kind."""
    return dict(_KINDS)


def transport_kind(host: Union[Host, str]) -> TransportKind:
    """The kind of an inventory host (or the kind called so); KeyError for an unknown one (the inventory refuses
    it first)."""
    return _KINDS[host if isinstance(host, str) else host.transport]


def _connect_local(name: str, host: LocalHost) -> Transport:
    from pdctl.transport.local import LocalTransport

    return LocalTransport(name)


def _connect_ssh(name: str, host: SshHost) -> Transport:
    """One paramiko connection, or with keep_connection (or $PDCTL_SSH_KEEP) > 0 a keeper's, kept between runs
    (kept.py: paramiko is then not even imported here). UsageError when $PDCTL_SSH_KEEP is no number of seconds."""
    from pdctl.transport.control import keep_seconds

    keep = keep_seconds(host)
    if keep > 0:
        from pdctl.transport.kept import KeptTransport

        return KeptTransport(name, host, keep)
    from pdctl.transport.ssh import SshTransport

    return SshTransport(name, host)


register(
    TransportKind(
        "local", LocalHost, _connect_local, ("direct",), "commands under /bin/sh on this machine (subprocess)"
    )
)
register(
    TransportKind(
        "ssh",
        SshHost,
        _connect_ssh,
        ("direct", "tunnel"),
        "one SSH connection per host (paramiko), optionally kept between runs by a keeper process",
    )
)
