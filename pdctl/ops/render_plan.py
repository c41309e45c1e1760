"""`pdctl render`: what deploy would write for each role, rendered from the inventory alone.

No host is asked: no transport is opened, no file read, no name resolved, so the units of a production inventory can
be reviewed on a laptop before a change window. The only thing a deploy may take from a host is the interpreter of
a role already installed there when the inventory declares none (see `launch.resolved_pythons`); offline, the
first-deploy default is shown and said to be one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from pdctl import launch
from pdctl.errors import UsageError
from pdctl.inventory import ROLES, Inventory
from pdctl.secrets import mask_argv, mask_env, mask_text, secret_values
from pdctl.services.base import ServiceSpec
from pdctl.services.pidfile import PidfileManager
from pdctl.services.systemd import SystemdManager, render_unit
from pdctl.transport.base import Transport
from pdctl.role_ref import RoleRef


@dataclass
class RenderedRole:
    label: str
    role: str
    index: int
    host: str
    service: str
    manager: str  # "systemd" or "pidfile"
    python: str
    python_source: str  # "inventory" or "default" (offline: nothing installed is read)
    argv: list[str]  # secrets masked
    env: dict[str, str]  # secrets masked
    path: str  # where deploy writes `text` on the host
    text: str  # the unit file (systemd) or the pidfile spec (JSON), secrets masked
    launcher: str | None  # pidfile: the shell command that starts it, secrets masked; systemd: None
    problem: str | None = None  # why deploy could not write it (e.g. a relative ExecStart), else None


@dataclass
class RenderPlan:
    inventory: str
    roles: list[RenderedRole]
    offline = True  # nothing in it was read on a host
    json_extra = ("ok", "offline")

    @property
    def ok(self) -> bool:
        return not any(r.problem for r in self.roles)


def _select(inv: Inventory, role: str | None) -> list[RoleRef]:
    """Every (role, index), or those `role` names: a role name (`decode`) or one instance (`decode[0]`)."""
    every = [RoleRef(r, i) for r, i, _ in inv.instances()]
    if role is None:
        return every
    picked = [RoleRef(r, i) for r, i in every if role in (r, f"{r}[{i}]", inv.label(r, i))]
    if not picked:
        names = ", ".join([*ROLES, *(f"{r}[{i}]" for r, i in every)])
        raise UsageError(f"--role {role}: no such role in {inv.source}", hint=f"one of: {names}")
    return picked


def _rendered(inv: Inventory, role: str, index: int, python: str, source: str) -> RenderedRole:
    from pdctl.services.connect import service_manager

    inst = getattr(inv.roles, role)[index]
    host = inv.hosts[inst.host]
    spec: ServiceSpec = launch.service_spec(inv, role, index, python=python)
    secrets = secret_values(spec.env, spec.argv)
    # its rendering only: deploy writes exactly this; no host is asked, so no transport is needed
    mgr = service_manager(host, transport=cast(Transport, None))
    launcher, problem = None, None
    if isinstance(mgr, SystemdManager):
        path = mgr.unit_path(spec.name)
        try:
            text = render_unit(spec, mgr.restart_policy, timeout_stop_sec=mgr.timeout_stop_sec)
        except ValueError as e:
            hint = f" (declare hosts.{inst.host}.python as an absolute path)" if "ExecStart" in str(e) else ""
            text, problem = "", f"{e}{hint}"
    else:
        assert isinstance(mgr, PidfileManager), mgr
        path = mgr.spec_path(spec.name)
        text = mgr.render_spec(spec)
        launcher = mask_text(mgr.launch_command(spec), secrets)
    return RenderedRole(
        label=inv.label(role, index),
        role=role,
        index=index,
        host=inst.host,
        service=spec.name,
        manager=host.service_manager,
        python=python,
        python_source=source,
        argv=mask_argv(list(spec.argv), secrets),
        env=mask_env(spec.env, secrets),
        path=path,
        text=mask_text(text, secrets),
        launcher=launcher,
        problem=problem,
    )


def render_plan(inv: Inventory, role: str | None = None) -> RenderPlan:
    """Render every role (or those `role` names) as deploy would write it, from the inventory alone. Contacts no
    host. Raises UsageError for a `role` the inventory does not have."""
    pythons = launch.resolved_pythons(inv, {})  # nothing installed is known offline
    return RenderPlan(inv.source, [_rendered(inv, r, i, *pythons[RoleRef(r, i)]) for r, i in _select(inv, role)])
