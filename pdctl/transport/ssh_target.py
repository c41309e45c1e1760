"""Where and as whom an SSH host is reached: the inventory's host with ssh_config applied (HostName, User, Port,
IdentityFile, ProxyJump, ProxyCommand), and the jump chain's last hop. Reads files, connects to nothing."""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pdctl.errors import UsageError
from pdctl.host_address import jump_problem, parse_hop
from pdctl.transport.known_hosts import ssh_config_for

if TYPE_CHECKING:
    from pdctl.inventory_hosts import SshHost


@dataclass(frozen=True)
class SshTarget:
    """Where and as whom to connect, after ssh_config is applied."""

    address: str
    port: int
    user: str
    key_files: tuple[str, ...]
    known_hosts: str
    proxy_jump: str | None = None  # [user@]host[:port][,...] (first hop is dialled first)
    proxy_command: str | None = None  # ssh_config ProxyCommand, tokens already expanded


def resolve_target(host: SshHost, name: str = "") -> SshTarget:
    """Apply ssh_config (HostName, User, Port, IdentityFile, ProxyJump, ProxyCommand) to the inventory's host
    `name`. Explicit inventory values win: `user`, `key`, and `port` when it is not the default 22; `ssh_config:
    none` reads none (as `ssh -F none`). Raises UsageError naming the host and file when a declared ssh_config does
    not exist or cannot be read (ssh_config_for), or its ProxyJump is no jump chain."""
    address, port, user, keys = host.address, host.port, host.user, [host.key] if host.key else []
    jump, command = host.proxy_jump, None
    cfg_path = os.path.expanduser(host.ssh_config or "~/.ssh/config")
    who = repr(name or host.address)
    if host.ssh_config and host.ssh_config != "none" and not os.path.exists(cfg_path):  # as ssh -F: only the
        raise UsageError(
            f"host {who}: ssh_config file {cfg_path} does not exist",  # default may be absent
            hint="fix the host's `ssh_config` in the inventory (`none`: read no ssh_config)",
        )
    if host.ssh_config != "none" and os.path.exists(cfg_path):
        cfg = ssh_config_for(cfg_path, who, host.address)
        address = cfg.get("hostname", address)
        if host.port == 22 and "port" in cfg:
            port = cfg["port"]
        user = user or cfg.get("user")
        if not keys:
            # like ssh, an IdentityFile of ssh_config that does not exist is skipped, not an error
            keys = [k for k in map(os.path.expanduser, cfg.get("identityfile", [])) if os.path.exists(k)]
        if jump is None and cfg.get("proxyjump", "none").lower() != "none":
            jump = cfg["proxyjump"]
            if problem := jump_problem(jump):
                raise UsageError(
                    f"host {who}: ssh_config {cfg_path}: ProxyJump {problem}",
                    hint="fix the file, or give the host a `proxy_jump` in the inventory",
                )
        if jump is None and cfg.get("proxycommand", "none").lower() != "none":
            command = cfg["proxycommand"]
    known = os.path.expanduser(host.known_hosts or "~/.ssh/known_hosts")
    return SshTarget(
        address, port, user or getpass.getuser(), tuple(os.path.expanduser(k) for k in keys), known, jump, command
    )


def parse_jump(spec: str) -> tuple[str | None, str, int | None, str | None]:
    """`hop1,hop2,...,hopN` (each `[user@]host[:port]`, `[v6]:port` accepted) -> the LAST hop, which dials the
    target, as (user, host, port, earlier hops or None): like `ssh -J`, hop1 is dialled first. Pure; raises
    ValueError saying what is wrong with the last hop (host_address.parse_hop)."""
    earlier, _, last = spec.rpartition(",")
    user, host, port = parse_hop(last)
    return user, host, port, earlier or None
