"""`action: inflight`: the PD queues sampled over a window; verdict drained / busy / pinned (or interrupted)."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from pdctl.checks.inflight import VERDICTS as INFLIGHT_VERDICTS
from pdctl.playbook.kinds import register
from pdctl.playbook.outcome import Args, RunContext, StepOutcome
from pdctl.playbook.steps import error_outcome, stop_if_interrupted
from pdctl.serialize import to_data


class InflightArgs(Args):
    window_s: Annotated[float, Meta(gt=0, le=3600)] = 30.0
    interval_s: Annotated[float, Meta(gt=0, le=600)] = 3.0


def describe(a: InflightArgs) -> str:
    return f"verify inflight --window {a.window_s:g} --interval {a.interval_s:g}"


#: checks.inflight's verdicts, and "unknown" when no complete sample was taken (InflightReport.name)
VERDICTS = (*INFLIGHT_VERDICTS, "unknown")


@register(
    "inflight",
    args=InflightArgs,
    gate_keys=("ok", "verdict"),
    mutating=False,
    describe=describe,
    summary="drained / busy / pinned",
    order=60,
    verdicts=VERDICTS,
)
def run(ctx: RunContext, a: InflightArgs) -> StepOutcome:
    from pdctl.errors import UnreachableError
    from pdctl.ops.inflight import sample_inflight

    try:  # preflight: a host or every worker that cannot be read is said at the first sample, not after the window
        rep = sample_inflight(ctx.dep, a.window_s, a.interval_s, preflight=True)
    except UnreachableError as e:
        out = error_outcome(e, ctx.secrets)  # masked, exit 3
        out.verdict = "unknown"
        return out
    code = rep.exit_code()
    why = rep.verdict.summary if rep.verdict is not None else ("; ".join(rep.notes) or "no complete sample")
    out = StepOutcome(
        code == 0,
        f"inflight: verdict {rep.name}" + (f"; {why}" if why else ""),
        exit_code=code,
        verdict=rep.name,
        data=to_data(rep),
    )
    return stop_if_interrupted(rep.partial, out, rep.interrupted_by)
