"""`pdctl restart --pair` (the clean co-restart) and `pdctl restart --role R` (guarded).

The pair restart takes the deployment lock, restarts prefill -> decode -> router each gated on readiness, runs
final-health, records the new lineage and appends an audit record. Restarting prefill or decode alone while the
other runs on is the seed's degraded-bootstrap hazard and is refused unless the operator overrides it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from pdctl import audit
from pdctl.errors import HazardRefused, carry_warnings
from pdctl.ops.context import Deployment, deployment_lock
from pdctl.ops.sequence import StatesAtInterrupt, StepRecord, ordered_restart, role_states
from pdctl.ops.lineage_record import save_lineage_record
from pdctl.ops.verify import HealthReport, final_health
from pdctl.serialize import json_key, to_data

PAIR = ("prefill", "decode", "router")


@dataclass
class RestartResult:
    roles: tuple[str, ...]
    dry_run: bool
    plan: list[str]
    steps: list[StepRecord] = field(default_factory=list)
    health: HealthReport | None = field(default=None, metadata=json_key("final_health"))
    warnings: list[str] = field(default_factory=list)
    json_extra = ("ok",)

    @property
    def ok(self) -> bool:
        return self.health is None or self.health.ok


def restart_plan(dep: Deployment, roles: tuple[str, ...]) -> list[str]:
    held = "prefill" in roles and "decode" in roles  # the decodes wait stopped for the prefills (ordered_restart)
    plan = (
        [
            f"stop {dep.inv.label('decode', i)} (until the prefills are back)"
            for i in reversed(range(len(dep.inv.roles.decode)))
        ]
        if held
        else []
    )
    for role, i, _ in dep.inv.instances():
        if role in roles:
            label = dep.inv.label(role, i)
            verb = "start" if held and role == "decode" else "restart"
            plan += [f"{verb} {label} ({dep.inv.service_name(role, i)})", f"wait {label} ready"]
    return plan + ["final-health"]


def hazard_of(dep: Deployment, roles: tuple[str, ...]) -> str | None:
    """Why restarting only `roles` is hazardous now, or None: `checks.lineage.lone_restart_hazard` (the rule the
    lineage layer judges by) on the roles whose instances run on. A router alone is never refused."""
    from pdctl.checks.lineage import KV_PAIR, lone_restart_hazard

    running = {
        role: [dep.inv.label(role, i) for role_, i, _ in dep.inv.instances(role) if dep.status(role, i).active]
        for role in KV_PAIR
        if role not in roles and any(r in KV_PAIR for r in roles)
    }
    why = lone_restart_hazard(roles, [r for r, labels in running.items() if labels])
    if why is None:
        return None
    on = ", ".join(label for labels in running.values() for label in labels)
    return (
        f"restarting {'/'.join(roles)} while {on} runs on leaves the KV bootstrap of the pair degraded "
        f"({why}: the seed's decode-only restarts, after which transfers fail silently while /health stays green)"
    )


def restart(
    dep: Deployment,
    *,
    roles: tuple[str, ...] = PAIR,
    dry_run: bool = False,
    override_hazard: bool = False,
    verify: bool = True,
    skip_lint: bool = False,
) -> RestartResult:
    """Restart `roles` in the safe order under the lock. Raises HazardRefused, LockHeld, StepFailed.

    The hazard is judged under the lock (so a concurrent restart cannot change it meanwhile) and a refusal is
    audited like any other outcome. A "started" record is appended before anything is done (UsageError when the
    audit log cannot be written); a lock taken over from a dead holder is a warning. A dry run judges the hazard
    without the lock and changes nothing. Before the first stop, the command line each role would start with
    (its installed definition) is linted on its host: LintRefused (exit 2) when one would not parse, nothing
    stopped; `skip_lint` overrides that, audited and a warning of the result."""
    roles = tuple(r for r in PAIR if r in roles)
    result = RestartResult(roles, dry_run, restart_plan(dep, roles))
    if dry_run:
        _refuse_on_hazard(dep, result, override_hazard)
        return result
    action = "restart --pair" if roles == PAIR else f"restart --role {','.join(roles)}"
    states = StatesAtInterrupt(dep)  # an interrupt's record and its message show the same states
    with (
        carry_warnings(result.warnings),
        states.carried(),
        audit.audited(
            action,
            inventory=dep.inv.source,
            mark_start=True,
            states=states,
            args={
                "roles": list(roles),
                "override_hazard": override_hazard,
                "skip_lint": skip_lint,
                "verify": verify,  # false: no final-health ran, so an ok end re-arms no heal (checks.heal_ledger)
            },
        ) as rec,
    ):
        with deployment_lock(dep, action, run=rec.run, states=lambda: role_states(dep)) as lock:
            if lock.took_over:
                result.warnings.append(f"took over the {lock.took_over.describe()}")
            _refuse_on_hazard(dep, result, override_hazard)
            lint_gate(dep, result, rec, skip_lint)
            rec.extra["warnings"] = result.warnings
            result.steps = ordered_restart(dep, roles)
            rec.extra["steps"] = to_data(result.steps)
            if roles == PAIR:
                save_lineage_record(dep)
            if verify:
                result.health = final_health(dep)
                rec.extra["final_health"] = to_data(result.health)
        rec.result = "ok" if result.ok else "final-health failed"
        return result


def _refuse_on_hazard(dep: Deployment, result: RestartResult, override: bool) -> None:
    hazard = hazard_of(dep, result.roles)
    if hazard and not override:
        raise HazardRefused(f"refused: {hazard}", hint="run `pdctl restart --pair`, or pass --override-hazard")
    if hazard:
        result.warnings.append(f"hazard overridden: {hazard}")


class Gated(Protocol):
    """What the lint gate reads and writes of a restart's result (RestartResult, RollingResult)."""

    roles: tuple[str, ...]
    warnings: list[str]


def lint_gate(dep: Deployment, result: Gated, rec, skip: bool) -> None:
    """What each of `result.roles` would start with, linted on its host before anything is stopped (LintRefused,
    exit 2); `skip` is recorded in the audit record `rec` and said in `result.warnings`."""
    from pdctl.checks.lint_report import unchecked_warnings
    from pdctl.ops.lint import gate, installed_specs

    report = gate(dep, {} if skip else installed_specs(dep, result.roles), skip=skip, action="restart")
    if skip:
        result.warnings.append("lint skipped (--skip-lint): the command lines were not checked on their hosts")
    unchecked = unchecked_warnings(report, "restart")
    result.warnings += unchecked
    rec.extra["lint"] = {
        "skipped": skip,
        "ok": report.ok,
        "findings": len(report.findings),
        "unchecked": len(unchecked),
    }
