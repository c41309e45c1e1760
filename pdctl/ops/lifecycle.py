"""`pdctl status`, `pdctl down`, `pdctl logs`: observe every role, stop in reverse order, read a role's log."""

from __future__ import annotations

import time
from typing import Any

from pdctl import audit
from pdctl.errors import PdctlError, UsageError
from pdctl.ops.context import Deployment, deployment_lock
from pdctl.ops.sequence import StepRecord, ordered_stop
from pdctl.serialize import to_data


def status(dep: Deployment) -> list[dict[str, Any]]:
    """One row per role instance: service, active, pid, uptime, URL. A host that could not be asked (did not answer
    in time, refused, unreachable) gives an "unknown" row with the reason and the error's exit code, not a raise,
    and never "stopped": nothing is known about its services."""

    def one(role: str, i: int) -> dict[str, Any]:
        row: dict[str, Any] = {"label": dep.inv.label(role, i), "role": role, "index": i,
                               "host": dep.instance(role, i).host, "service": dep.inv.service_name(role, i)}
        try:
            st = dep.status(role, i)
        except PdctlError as e:
            return {**row, "active": False, "state": "unknown", "pid": None, "uptime_s": None,
                    "detail": e.message.splitlines()[0],
                    "error_exit_code": e.exit_code, "error": e.message, "hint": e.hint}
        up = round(time.time() - st.started_at, 1) if st.active and st.started_at else None
        return {**row, "active": st.active, "state": "running" if st.active else "stopped", "pid": st.main_pid,
                "uptime_s": up, "detail": st.detail}

    return [r.value for r in dep.each_instance(one)]


def down(dep: Deployment, *, dry_run: bool = False) -> list[StepRecord] | list[str]:
    """Stop router -> decode -> prefill under the lock. Dry run returns the plan."""
    if dry_run:
        return [f"stop {dep.inv.label(r, i)}" for r, i, _ in reversed(dep.inv.instances())]
    with audit.audited("down", inventory=dep.inv.source, args={}) as rec, deployment_lock(dep, "down"):
        steps = ordered_stop(dep)
        rec.extra["steps"] = to_data(steps)
        rec.result = "ok"
        return steps


def logs(dep: Deployment, role: str, *, index: int = 0, lines: int = 200) -> str:
    """The last `lines` of a role instance's log, with the role's secret env values scrubbed."""
    from pdctl.secrets import is_secret_name, mask_text

    instances = getattr(dep.inv.roles, role)
    if not 0 <= index < len(instances):
        raise UsageError(f"--index {index}: {role} has {len(instances)} instance(s)")
    inst = instances[index]
    text = dep.services(inst.host).log_tail(dep.inv.service_name(role, index), lines=lines)
    secrets = [v for k, v in inst.env.items() if is_secret_name(k) and v]
    return mask_text(text, secrets)
