"""Pick the service manager for an inventory host."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pdctl.services.base import ServiceManager
from pdctl.transport.base import Transport

if TYPE_CHECKING:
    from pdctl.inventory import Host

REMOTE_STATE_DIR = "/var/lib/pdctl"


def default_state_dir(host: Host) -> str:
    """host.state_dir, else $XDG_STATE_HOME/pdctl (default ~/.local/state/pdctl) on a host whose commands run here,
    /var/lib/pdctl on a remote one."""
    if host.state_dir:
        return host.state_dir
    if host.runs_here:
        base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        return os.path.join(base, "pdctl")
    return REMOTE_STATE_DIR


def service_manager(host: Host, transport: Transport, *, state_dir: str | None = None) -> ServiceManager:
    """A SystemdManager or PidfileManager (state under `state_dir` or `default_state_dir(host)`) per
    host.service_manager."""
    if host.service_manager == "systemd":
        from pdctl.services.systemd import SystemdManager

        return SystemdManager(transport, restart=host.restart_policy, command_timeout=host.command_timeout)
    from pdctl.services.pidfile import PidfileManager

    return PidfileManager(transport, state_dir or default_state_dir(host), command_timeout=host.command_timeout)
