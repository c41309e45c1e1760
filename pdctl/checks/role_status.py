"""One row of `pdctl status`: a role instance's service as observed, or why its host could not be asked.

Built by ops.lifecycle.status, read by render.status, the CLI and the restart-lineage judges. A row whose host could
not be asked is "unknown", never "stopped": nothing is known about its services. A running prefill or decode also
says whether the routers route to it (`routing`, pdctl.checks.router_membership): running is not serving."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, Sequence

from pdctl.checks.router_membership import Membership
from pdctl.errors import ExitCode
from pdctl.role_ref import RoleRef

RoleState = Literal["running", "stopped", "unknown"]

# the keys a --json row of each kind never has (both kinds share one class, so each leaves out the other's keys)
_REACHED_ONLY = ("started_at", "restarts")
_UNKNOWN_ONLY = ("error_exit_code", "error", "hint")
_ROUTED_ONLY = ("routing",)  # only a running prefill or decode whose routers were read has it


@dataclass(frozen=True)
class RoleStatus:
    """The fields in the order of `pdctl status --json`'s row. A reached row has `started_at` and `restarts` (None
    when stopped, or for a pidfile service); an unknown row has `error`, `error_exit_code` and `hint` instead."""

    label: str
    role: str
    index: int
    host: str
    service: str
    active: bool
    state: RoleState = dataclasses.field(init=False)  # from `active` and `error`: never out of step with them
    pid: int | None = None
    started_at: float | None = None  # epoch seconds the running main process started
    uptime_s: float | None = None
    detail: str = ""
    restarts: int | None = None  # systemd's NRestarts; None for pidfile services
    error_exit_code: int | None = None  # why the host could not be asked: the error's exit code, message and hint
    error: str | None = None
    hint: str | None = None
    routing: Membership | None = None  # a running prefill or decode: whether every router routes to it

    def __post_init__(self) -> None:
        if self.error is not None and (self.active or self.started_at is not None or self.restarts is not None):
            raise ValueError(f"{self.label}: a host that could not be asked has no service facts")
        if self.routing is not None and (not self.active or self.role == "router"):
            raise ValueError(f"{self.label}: only a running prefill or decode is routed to")
        state: RoleState = "unknown" if self.error is not None else ("running" if self.active else "stopped")
        object.__setattr__(self, "state", state)  # frozen: the one assignment, at construction

    @property
    def json_omit_empty(self) -> tuple[str, ...]:
        """serialize.to_data's per-row omission: the other kind's keys (always None in this row) are left out, so
        each kind keeps its own --json shape."""
        return (_REACHED_ONLY if self.state == "unknown" else _UNKNOWN_ONLY) + _ROUTED_ONLY

    @property
    def routed(self) -> bool | None:
        """False when a router does not route to this running worker (or its list could not be read on a live
        host), None when that is unknown or was not asked, True otherwise."""
        return None if self.routing is None else self.routing.routed


def status_exit_code(rows: Sequence[RoleStatus]) -> int:
    """`pdctl status`'s exit code: the worst error of a host that could not be asked (3 unreachable, 4 refused, 2
    a key file missing), else 1 when a role is not running or a router that answered does not route to a running
    worker, else 0. A router list that could not be read is said (routing unknown), not judged: status is about
    processes, and a router that does not answer is final-health's router layer to fail. Pure."""
    errors = [r.error_exit_code for r in rows if r.error_exit_code]
    if errors:
        return max(errors)
    if any(not r.active or r.routed is False for r in rows):
        return ExitCode.CHECK_FAILED
    return ExitCode.OK


def serving_by_router(rows: Sequence[RoleStatus]) -> dict[str, list[RoleRef]] | None:
    """Router label -> the workers it routes to now, from the rows' membership (as pdctl.ops.router_workers.serving
    reads it for the rolling restart), for the co-restart advice: only the routers whose list was read; None when
    none was. Pure."""
    seen = [(RoleRef(r.role, r.index), r.routing) for r in rows if r.role != "router" and r.routing is not None]
    unread = {u.router for _, m in seen for u in m.unread}
    routers = [r.label for r in rows if r.role == "router" and r.active and r.label not in unread]
    if not seen or not routers:
        return None
    return {router: [w for w, m in seen if all(x.router != router for x in m.missing)] for router in routers}


def co_restart_advice(rows: Sequence[RoleStatus]) -> tuple[str, str | None] | None:
    """The co-restart that puts back the running workers a router does not route to, as `restart --rolling`'s own
    messages advise it (pdctl.checks.rolling.least_disruptive_co_restart): (command, why the rolling one is
    refused or None); None when every router whose list was read routes to every running worker. Pure."""
    from pdctl.checks.rolling import least_disruptive_co_restart

    serving = serving_by_router(rows)
    if serving is None or not any(r.routing is not None and r.routing.missing for r in rows):
        return None
    n = {role: sum(1 for r in rows if r.role == role) for role in ("prefill", "decode")}
    return least_disruptive_co_restart(n["prefill"], n["decode"], serving)


def co_restart_command(rows: Sequence[RoleStatus]) -> str:
    """The co-restart to advise for any hazard `pdctl status` names (a restart-lineage hazard too), so that status
    and `restart --rolling`'s own messages agree: `pdctl restart --rolling` unless its refusal applies with what the
    routers hold now (or, when no router's list was read, the inventory's shape), else `pdctl restart --pair`."""
    from pdctl.checks.rolling import least_disruptive_co_restart

    n = {role: sum(1 for r in rows if r.role == role) for role in ("prefill", "decode")}
    return least_disruptive_co_restart(n["prefill"], n["decode"], serving_by_router(rows) or {})[0]


def status_next_step(rows: Sequence[RoleStatus]) -> str:
    """The one command `pdctl status` says to run next, "" when all is well: fix the inventory's files (a retry
    cannot help), retry before acting on a host nothing is known of, deploy what is stopped, else the co-restart
    that puts back workers a router does not route to. Pure."""
    if any(r.error_exit_code == ExitCode.USAGE for r in rows):
        return "fix what the error below names, then `pdctl status` again"
    if any(r.state == "unknown" for r in rows):  # deploy would act on a host we know nothing about
        return "pdctl status (again: nothing is known of the unknown roles; retry before acting)"
    if any(r.state == "stopped" for r in rows):
        return "pdctl deploy (starts what is not running, prefill -> decode -> router)"
    advice = co_restart_advice(rows)
    return advice[0] if advice is not None else ""
