"""The inventory's hosts: one model per transport kind, told apart by the `transport` field (a msgspec tagged
union), so a host carries only the fields of how it is reached.

`transport: local` (the default) runs commands on this machine; `transport: ssh` reaches `address` over one SSH
connection. What is asked of a host's kind (how to connect, whether commands run here, how HTTP reaches its roles)
is answered by the host (`runs_here`, `http_route`) and by the transports registry (pdctl/transport/kinds.py),
never by comparing `transport` to a string. A new kind: its model here (a `Host` subclass with its tag), in
`AnyHost` and `HOST_TYPES`, and its `TransportKind` in the registry (docs/inventory.md, "Hosts").
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Optional, Union

import msgspec
from msgspec import Meta

from pdctl.inventory_base import Port, Seconds, Strict
from pdctl.struct_errors import field_error, field_errors

HttpRoute = Literal["direct", "tunnel"]
DEFAULT_TRANSPORT = "local"  # a host without `transport` is this machine, as before hosts were told apart
# A keeper kept for less ends between the requests of one run: a tunnel URL it handed out dies before it is used,
# and every request pays a new keeper and SSH handshake (PDCTL_SSH_KEEP=0.001 failed healthy final-health runs).
MIN_KEEP_S = 5.0
MAX_KEEP_S = 86400.0


class _HostMeta(msgspec.StructMeta):
    """`Host(transport="ssh", address=...)` builds the model its `transport` names (default local), as the one
    flat Host did; `SshHost(...)` and the others build themselves."""

    def __call__(cls, *args: Any, **fields: Any) -> Any:
        if cls is Host:
            kind = fields.pop("transport", DEFAULT_TRANSPORT)
            if kind not in HOST_TYPES:
                raise ValueError(f"unknown transport {kind!r} (choose from {', '.join(HOST_TYPES)})")
            return HOST_TYPES[kind](*args, **fields)
        return super().__call__(*args, **fields)


class Host(Strict, tag_field="transport", metaclass=_HostMeta):
    """A machine: the fields every transport kind has. `transport` is the tag (readable as an attribute)."""

    runs_here: ClassVar[bool] = False  # commands run on this machine: nothing to connect to, this interpreter

    address: str = "127.0.0.1"  # how pdctl (and, without internal_address, other hosts) reach it
    internal_address: Optional[str] = None  # how other roles reach this host; default 127.0.0.1 (same host)
    service_manager: Literal["systemd", "pidfile"] = "pidfile"
    # the Restart= of the units pdctl renders; docs/inventory.md says what each choice costs (systemd only);
    # a bool because YAML reads a bare `no` as false
    systemd_restart: Union[Literal["on-failure", "always", "no"], bool] = "on-failure"
    python: Optional[str] = None  # interpreter for engine/sglang; default: this one (local), python3 (ssh)
    state_dir: Optional[str] = None  # pidfiles, logs, rendered launchers; default per transport
    workdir: Optional[str] = None  # cwd of launched processes (bundled engine: a checkout with engine/)
    command_timeout: Seconds = 60.0

    @property
    def transport(self) -> str:
        """The kind's name (the inventory's `transport:`), for messages and for the registry's lookup."""
        return str(self.__struct_config__.tag)

    @property
    def http_route(self) -> HttpRoute:
        """How HTTP from this machine reaches the host's roles: `direct` to their address, or a `tunnel`."""
        return "direct"

    @property
    def restart_policy(self) -> str:
        """systemd_restart as the unit's Restart= word (a YAML `no` was read as false and is stored as "no")."""
        return "no" if self.systemd_restart is False else str(self.systemd_restart)

    def _problems(self) -> list[tuple[str, str]]:
        """(field, why) of every field a check refuses; a kind adds its own."""
        from pdctl.host_address import address_problem

        checks = [
            ("address", address_problem(self.address)),
            ("internal_address", self.internal_address is not None and address_problem(self.internal_address)),
            ("workdir", self.workdir is not None and self._workdir_problem(self.workdir)),
        ]
        return [(name, why) for name, why in checks if why]

    def _workdir_problem(self, path: str) -> str | None:
        """Why `path` cannot be the roles' working directory here: a control character (never meant, and a newline
        would end the systemd unit's line), or a relative path for systemd."""
        import unicodedata

        odd = [ch for ch in path if unicodedata.category(ch) in ("Cc", "Zl", "Zp")]
        if odd:
            what = "a newline" if "\n" in odd else f"the control character {odd[0]!r}"
            return (
                f"contains {what} ({path!r}): no working directory is meant so (a YAML block scalar leaves a newline "
                "at the end), and a systemd unit's WorkingDirectory= is one line"
            )
        if self.service_manager == "systemd" and not path.startswith("/"):
            return (
                f"must be an absolute path with service_manager: systemd, got {path!r} "
                "(a unit's WorkingDirectory= takes no relative one)"
            )
        return None

    def __post_init__(self) -> None:
        problems = self._problems()
        if problems:
            raise field_errors(problems)
        if self.systemd_restart is False:
            self.systemd_restart = "no"
        elif self.systemd_restart is True:
            raise field_error("systemd_restart", "expected 'on-failure', 'always' or 'no'")
        # the default is allowed anywhere: a dumped and re-read inventory carries it on every host
        if self.systemd_restart != "on-failure" and self.service_manager != "systemd":
            raise field_error(
                "systemd_restart",
                "only service_manager: systemd restarts a service on its own (the pidfile manager never does)",
            )


class LocalHost(Host, tag="local"):
    """This machine: commands run under /bin/sh here, HTTP goes straight to the role's address."""

    runs_here: ClassVar[bool] = True


class SshHost(Host, tag="ssh"):
    """A machine reached over one SSH connection (paramiko), ssh_config and known_hosts honoured."""

    user: Optional[str] = None
    port: Port = 22
    key: Optional[str] = None  # private key file
    known_hosts: Optional[str] = None  # default: ~/.ssh/known_hosts
    accept_new_host_key: bool = False  # only an explicit yes trusts an unknown key
    ssh_config: Optional[str] = None  # default: ~/.ssh/config when it exists; `none`: read none
    proxy_jump: Optional[str] = None  # like ssh -J: [user@]host[:port][,next-hop...]; else ssh_config's ProxyJump
    connect_timeout: Seconds = 10.0
    http: HttpRoute = "direct"  # tunnel: reach role ports via the SSH connection
    keep_connection: Annotated[float, Meta(ge=0, le=MAX_KEEP_S)] = 0.0  # idle seconds a keeper holds it; 0 off

    @property
    def http_route(self) -> HttpRoute:
        return self.http

    def _problems(self) -> list[tuple[str, str]]:
        from pdctl.host_address import jump_problem

        jump = self.proxy_jump is not None and jump_problem(self.proxy_jump)
        problems = super()._problems() + ([("proxy_jump", jump)] if jump else [])
        if 0 < self.keep_connection < MIN_KEEP_S:  # shorter ends the keeper between the requests of one run
            expected = f"expected 0 (off) or seconds from {MIN_KEEP_S:g} to {MAX_KEEP_S:g}"
            problems.append(("keep_connection", f"{self.keep_connection:g}: {expected}"))
        return problems


AnyHost = Union[LocalHost, SshHost]  # what an inventory's `hosts` hold
HOST_TYPES: dict[str, type[Host]] = {"local": LocalHost, "ssh": SshHost}


def with_default_transport(hosts: Any) -> Any:
    """The inventory's `hosts` mapping with `transport: local` on every host that names none (msgspec's tagged
    union needs the tag); anything else is returned as it is, for the validation to say what is wrong."""
    if not isinstance(hosts, dict):
        return hosts
    return {
        name: {"transport": DEFAULT_TRANSPORT, **h} if isinstance(h, dict) and "transport" not in h else h
        for name, h in hosts.items()
    }


def host_hint(hosts: Any) -> str | None:
    """What to do about a host of an unknown transport kind, or one that sets fields of another kind (`user` on a
    host without `transport: ssh`); None when neither is the case."""
    if not isinstance(hosts, dict):
        return None
    for name, h in hosts.items():
        if not isinstance(h, dict):
            continue
        said = h.get("transport", DEFAULT_TRANSPORT)
        own = HOST_TYPES.get(said) if isinstance(said, str) else None
        if own is None:
            return f"hosts.{name}.transport: choose from {', '.join(HOST_TYPES)}"
        for kind, typ in HOST_TYPES.items():
            foreign = [k for k in h if k in typ.__struct_fields__ and k not in own.__struct_fields__]
            if foreign:
                what = f"{foreign[0]} is a field" if len(foreign) == 1 else f"{', '.join(foreign)} are fields"
                return f"hosts.{name}: {what} of `transport: {kind}` hosts; set `transport: {kind}` if it is one"
    return None
