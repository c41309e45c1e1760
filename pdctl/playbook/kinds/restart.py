"""`action: restart`: the ordered co-restart (the pair, or the roles named), then final-health."""

from __future__ import annotations

from typing import Optional

from pdctl.playbook.kinds import register
from pdctl.playbook.outcome import ROLE, Args, RunContext, StepOutcome
from pdctl.playbook.steps import health_step_outcome
from pdctl.serialize import to_data
from pdctl.struct_errors import field_error


class RestartArgs(Args):
    pair: bool = True
    roles: Optional[list[ROLE]] = None
    override_hazard: bool = False
    verify: bool = True

    def __post_init__(self) -> None:
        if self.roles and self.pair:
            raise field_error("roles", "give pair: true or roles: [...], not both (set pair: false with roles)")
        if not self.roles and not self.pair:
            raise field_error("pair", "nothing to restart: pair is false and no roles given")


def describe(a: RestartArgs) -> str:
    s = "restart --pair" if a.pair else "restart " + " ".join(f"--role {r}" for r in a.roles or ())
    return s + (" --override-hazard" if a.override_hazard else "") + ("" if a.verify else " --no-verify")


@register(
    "restart",
    args=RestartArgs,
    gate_keys=("ok", "layers_pass"),
    mutating=True,
    describe=describe,
    summary="the ordered co-restart (pair), then final-health",
    order=20,
)
def run(ctx: RunContext, a: RestartArgs) -> StepOutcome:
    from pdctl.ops.restart import PAIR, restart

    roles = PAIR if a.pair else tuple(a.roles or ())
    res = restart(ctx.dep, roles=roles, override_hazard=a.override_hazard, verify=a.verify)
    what = f"restarted {'/'.join(roles)}: {len(res.steps)} restart steps in {sum(s.seconds for s in res.steps):.1f}s"
    if res.health is None:
        return StepOutcome(True, what, data=to_data(res))
    return health_step_outcome(what, res.health, to_data(res))
