"""`pdctl status`, `pdctl down`, `pdctl logs`: observe every role, stop in reverse order, read a role's log."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from pdctl import audit
from pdctl.checks.role_status import RoleStatus
from pdctl.errors import CheckFailed, PdctlError, UsageError
from pdctl.engines import engine_kind
from pdctl.ops.context import Deployment, deployment_lock
from pdctl.ops.sequence import StepRecord, ordered_stop
from pdctl.serialize import to_data

if TYPE_CHECKING:
    from pdctl.lock import Abandoned


def status(dep: Deployment) -> list[RoleStatus]:
    """One row per role instance: service, active, pid, uptime, restarts (systemd's NRestarts; None for pidfile
    services). A host that could not be asked (did not answer in time, refused, unreachable) gives an "unknown" row
    with the reason and the error's exit code, not a raise, and never "stopped": nothing is known about its services."""

    def one(role: str, i: int) -> RoleStatus:
        label, host, service = dep.inv.label(role, i), dep.instance(role, i).host, dep.inv.service_name(role, i)
        try:
            st = dep.status(role, i)
        except PdctlError as e:
            return RoleStatus(
                label,
                role,
                i,
                host,
                service,
                active=False,
                detail=e.message.splitlines()[0],
                error_exit_code=e.exit_code,
                error=e.message,
                hint=e.hint,
            )
        return RoleStatus(
            label,
            role,
            i,
            host,
            service,
            active=st.active,
            pid=st.main_pid,
            started_at=st.started_at if st.active else None,
            uptime_s=round(time.time() - st.started_at, 1) if st.active and st.started_at else None,
            detail=st.detail,
            restarts=st.restarts,
        )

    rows = []
    for r in dep.each_instance(one):
        assert r.value is not None, r.error  # one() turns every PdctlError into a row of its own
        rows.append(r.value)
    return rows


def status_hazards(dep: Deployment, rows: list[RoleStatus], abandoned: Abandoned | None = None) -> list[str]:
    """What `status` must say besides each role's state: an abandoned deployment lock (`abandoned`, read by the
    caller with the holder: a killed pdctl may have left the deployment half done) and the restart-lineage hazards
    of the running processes (e.g. decode restarted alone: prefill new, decode old; or restarted by systemd under a
    running prefill). Reads only; a host that cannot be asked adds nothing here (its rows say unknown)."""
    from pdctl.checks.lineage import judge_lineage
    from pdctl.checks.role_status import co_restart_command
    from pdctl.checks.result import Status
    from pdctl.ops.lineage_record import LINEAGE_WINDOW_S, load_lineage_record

    out = [abandoned.describe()] if abandoned is not None else []
    if any(r.state == "unknown" for r in rows):
        return out  # lineage from part of the deployment would judge the rest wrongly
    # as the lineage layer's snapshot: a service with no main pid has no process to judge
    starts = {r.label: (r.role, r.pid, r.started_at) for r in rows if r.active and r.pid is not None}
    if not starts:
        return out
    from pdctl.checks.systemd_restarts import UnitRestarts, judge_systemd_restarts
    from pdctl.services.systemd import unit_name

    units = {
        r.label: UnitRestarts(r.role, unit_name(r.service), r.restarts, r.pid, r.started_at)
        for r in rows
        if r.active and r.restarts is not None
    }
    for c in judge_lineage(
        starts,
        load_lineage_record(dep),
        LINEAGE_WINDOW_S,
        known=engine_kind(dep.inv.engine).hazard(dep.inv.transfer_backend),
    ) + judge_systemd_restarts(units):
        if c.status in (Status.FAIL, Status.WARN) and c.data.get("hazard"):
            # the co-restart `restart --rolling`'s own messages advise (rolling on xPyD), not always the outage
            out.append(f"restart lineage: {c.target}: {c.observed}; {co_restart_command(rows)}")
    return out


def down(dep: Deployment, *, dry_run: bool = False, purge: bool = False) -> list[StepRecord] | list[str]:
    """Stop router -> decode -> prefill under the lock; with `purge`, then remove each role's rendered spec/unit
    and log. Dry run returns the plan."""
    if dry_run:
        plan = [f"stop {dep.inv.label(r, i)}" for r, i, _ in reversed(dep.inv.instances())]
        return plan + (
            [f"remove the spec and log of {dep.inv.label(r, i)}" for r, i, _ in dep.inv.instances()] if purge else []
        )
    with audit.audited("down", inventory=dep.inv.source, args={}, mark_start=True) as rec, deployment_lock(dep, "down"):
        steps = ordered_stop(dep)
        if purge:
            steps += purge_files(dep)
        rec.extra["steps"] = to_data(steps)
        rec.result = "ok"
        return steps


def logs(dep: Deployment, role: str, *, index: int = 0, lines: int = 200) -> str:
    """The last `lines` of a role instance's log, with every secret the inventory declares scrubbed (any role's env
    and launch flags: a peer's token can reach this log too)."""
    from pdctl.secrets import inventory_secrets, mask_text

    instances = getattr(dep.inv.roles, role)
    if not 0 <= index < len(instances):
        raise UsageError(f"--index {index}: {role} has {len(instances)} instance(s)")
    inst = instances[index]
    services, name = dep.services(inst.host), dep.inv.service_name(role, index)
    text = services.log_tail(name, lines=lines)
    if not text:  # nothing read: an empty log, or none at all (an empty screen would say neither)
        missing = services.missing_log(name)
        if missing is not None:
            raise CheckFailed(
                f"{dep.inv.label(role, index)}: no log file: {missing} does not exist",
                hint="not started there since its state was purged, or never deployed: see `pdctl status`",
            )
    return mask_text(text, inventory_secrets(dep.inv))


def purge_files(dep: Deployment) -> list[StepRecord]:
    """Remove every (stopped) role's rendered spec or unit and its log, one step each."""
    steps = []
    for role, i, inst in dep.inv.instances():
        t0 = time.monotonic()
        removed = dep.services(inst.host).purge(dep.inv.service_name(role, i))
        steps.append(
            StepRecord(f"purge {dep.inv.label(role, i)}: " + ", ".join(removed), round(time.monotonic() - t0, 3), True)
        )
    return steps
