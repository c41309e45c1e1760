"""`pdctl deploy`: render every role's service, install what changed, co-restart in the safe order, verify.

Re-running with nothing changed and everything up restarts nothing. Any change (or any role down) co-restarts the
whole pair in order prefill -> decode -> router: restarting decode alone against a running prefill is the seed's
degraded-bootstrap hazard, so deploy never does it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pdctl import audit, launch
from pdctl.errors import StepFailed, carry_warnings
from pdctl.ops.context import Deployment, deployment_lock
from pdctl.ops.sequence import StatesAtInterrupt, StepRecord, ordered_restart, role_states
from pdctl.ops.lineage_record import save_lineage_record
from pdctl.ops.verify import HealthReport, final_health
from pdctl.role_ref import RoleRef
from pdctl.secrets import mask_argv, mask_env, secret_values
from pdctl.serialize import json_key, to_data
from pdctl.services.base import ServiceSpec, spec_changes


@dataclass
class RolePlan:
    label: str
    role: str
    index: int
    service: str
    argv: list[str]
    env: dict[str, str]
    changed: bool
    running: bool
    changes: list[str] = field(default_factory=list)  # what installing changes (secrets masked)
    python: str = ""  # the interpreter the role runs under (argv[0])
    python_source: str = ""  # inventory | installed | host | default (launch.resolved_pythons)
    # for JSON, the role's own secret values scrubbed from argv, env values and env names alike
    json_extra = (("argv", "masked_argv"), ("env", "masked_env"))

    @property
    def masked_argv(self) -> list[str]:
        return mask_argv(self.argv, secret_values(self.env, self.argv))

    @property
    def masked_env(self) -> dict[str, str]:
        return mask_env(self.env, secret_values(self.env, self.argv))


#: which parts of a plan were read on the hosts; the rest is rendered from the inventory (`pdctl render`, offline)
FROM_HOSTS = (
    "changed/unchanged, running/not running and the change lines were read on the hosts, and so was an "
    "interpreter kept from an installed spec; command lines, env and units are rendered from the inventory "
    "(`pdctl render` shows them offline)"
)


@dataclass
class DeployPlan:
    roles: list[RolePlan]
    action: str  # "none" or "co-restart"
    reason: str
    from_hosts: str = FROM_HOSTS


@dataclass
class DeployResult:
    plan: DeployPlan
    steps: list[StepRecord] = field(default_factory=list)
    health: HealthReport | None = field(default=None, metadata=json_key("final_health"))
    warnings: list[str] = field(default_factory=list)
    json_extra = ("ok",)

    @property
    def ok(self) -> bool:
        return self.health is None or self.health.ok


def plan_deploy(dep: Deployment) -> DeployPlan:
    """Observe what is installed and running; decide what deploy would do. Changes nothing."""
    installed: dict[RoleRef, ServiceSpec | None] = {}
    unreadable: dict[RoleRef, str] = {}
    for role, i, inst in dep.inv.instances():
        try:
            installed[RoleRef(role, i)] = dep.services(inst.host).installed_spec(dep.inv.service_name(role, i))
        except StepFailed as e:
            installed[RoleRef(role, i)] = None
            unreadable[RoleRef(role, i)] = f"installed definition unreadable ({e.message.splitlines()[0]}); rewritten"
    # the interpreter is the deployment's (declared or recorded on the host), never the one running pdctl
    pythons = launch.resolved_pythons(dep.inv, installed)
    roles = []
    for role, i, inst in dep.inv.instances():
        python, source = pythons[RoleRef(role, i)]
        spec = launch.service_spec(dep.inv, role, i, python=python)
        mgr = dep.services(inst.host)
        changed = not mgr.is_current(spec)
        changes = []
        if changed:
            changes = (
                [unreadable[RoleRef(role, i)]]
                if RoleRef(role, i) in unreadable
                else spec_changes(installed[RoleRef(role, i)], spec) or ["service definition differs"]
            )
        roles.append(
            RolePlan(
                label=dep.inv.label(role, i),
                role=role,
                index=i,
                service=spec.name,
                argv=list(spec.argv),
                env=dict(spec.env),
                changed=changed,
                running=mgr.status(spec.name).active,
                changes=changes,
                python=python,
                python_source=source,
            )
        )
    changed_labels = [r.label for r in roles if r.changed]
    down = [r.label for r in roles if not r.running]
    if not changed_labels and not down:
        return DeployPlan(roles, "none", "every role is installed as declared and running")
    why: list[str] = []
    if changed_labels:
        why.append("changed: " + ", ".join(changed_labels))
    if down:
        why.append("not running: " + ", ".join(down))
    return DeployPlan(roles, "co-restart", "; ".join(why))


def deploy(dep: Deployment, *, dry_run: bool = False, verify: bool = True, skip_lint: bool = False) -> DeployResult:
    """Plan, then (unless dry run) apply under the deployment lock and run final-health. Appends a "started"
    audit record before anything is done (UsageError when the log cannot be written) and a final one; a lock
    taken over from a dead holder is said, audited and a warning of the result. Before installing anything, each
    role's new command line is linted on its host (pdctl.ops.lint.gate): LintRefused (exit 2) when one would not
    parse, nothing installed or stopped; `skip_lint` overrides that, audited and a warning of the result."""
    if dry_run:
        return DeployResult(plan_deploy(dep))
    states = StatesAtInterrupt(dep)  # an interrupt's record and its message show the same states
    warned: list[str] = []  # the result's warnings; an error says them too (carry_warnings)
    with (
        carry_warnings(warned),
        states.carried(),
        audit.audited(
            "deploy",
            inventory=dep.inv.source,
            args={"dry_run": False, "skip_lint": skip_lint, "verify": verify},  # verify: see ops.restart
            mark_start=True,
            states=states,
        ) as rec,
        deployment_lock(dep, "deploy", run=rec.run, states=lambda: role_states(dep)) as lock,
    ):
        result = DeployResult(plan_deploy(dep), warnings=warned)  # observed under the lock: nobody changes it
        if lock.took_over:
            result.warnings.append(f"took over the {lock.took_over.describe()}")
            rec.extra["warnings"] = result.warnings
        rec.extra["plan"] = to_data(result.plan)
        if result.plan.action == "co-restart":
            _lint_gate(dep, result, rec, skip_lint)
            for k, r in enumerate(result.plan.roles):
                inst = dep.instance(r.role, r.index)
                with dep.progress.step(f"install {r.service}", index=k, total=len(result.plan.roles)):
                    dep.services(inst.host).install(launch.service_spec(dep.inv, r.role, r.index, python=r.python))
            result.steps = ordered_restart(dep)
            rec.extra["steps"] = to_data(result.steps)
            save_lineage_record(dep)
        if verify:
            result.health = final_health(dep)
            rec.extra["final_health"] = to_data(result.health)
        rec.result = "ok" if result.ok else "final-health failed"
        return result


def _lint_gate(dep: Deployment, result: DeployResult, rec, skip: bool) -> None:
    """The new command lines, linted on their hosts before anything is installed (LintRefused, exit 2)."""
    from pdctl.checks.lint_report import unchecked_warnings
    from pdctl.ops.lint import gate

    specs = {
        RoleRef(r.role, r.index): launch.service_spec(dep.inv, r.role, r.index, python=r.python)
        for r in result.plan.roles
    }
    report = gate(dep, specs, skip=skip, action="deploy")
    if skip:
        result.warnings.append("lint skipped (--skip-lint): the new command lines were not checked on their hosts")
    unchecked = unchecked_warnings(report, "deploy")
    result.warnings += unchecked
    rec.extra["lint"] = {
        "skipped": skip,
        "ok": report.ok,
        "findings": len(report.findings),
        "unchecked": len(unchecked),
    }
    rec.extra["warnings"] = result.warnings
