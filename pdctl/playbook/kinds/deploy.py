"""`action: deploy`: render, install, co-start, final-health."""

from __future__ import annotations

from pdctl.playbook.kinds import register
from pdctl.playbook.outcome import Args, RunContext, StepOutcome
from pdctl.playbook.steps import health_step_outcome
from pdctl.serialize import to_data


class DeployArgs(Args):
    verify: bool = True


def describe(a: DeployArgs) -> str:
    return "deploy" + ("" if a.verify else " --no-verify")


@register(
    "deploy",
    args=DeployArgs,
    gate_keys=("ok", "layers_pass"),
    mutating=True,
    describe=describe,
    summary="render, install, co-start, final-health",
    order=30,
)
def run(ctx: RunContext, a: DeployArgs) -> StepOutcome:
    from pdctl.ops.deploy import deploy

    res = deploy(ctx.dep, verify=a.verify)
    what = f"deploy: {res.plan.action} ({res.plan.reason})"
    if res.health is None:
        return StepOutcome(True, what, data=to_data(res))
    return health_step_outcome(what, res.health, to_data(res))
