"""`action: triage`: the stall decision path; verdict clean / warn / action (or interrupted)."""

from __future__ import annotations

from typing import Annotated, Optional

from msgspec import Meta

from pdctl.errors import ExitCode
from pdctl.playbook.kinds import register
from pdctl.playbook.outcome import Args, RunContext, StepOutcome
from pdctl.playbook.steps import stop_if_interrupted
from pdctl.serialize import to_data


class TriageArgs(Args):
    window_s: Optional[Annotated[float, Meta(gt=0, le=3600)]] = None  # inflight/decode-idle window (default: triage's)
    interval_s: Optional[Annotated[float, Meta(gt=0, le=600)]] = None


def triage_headline(rep) -> str:
    """The words `pdctl triage` ends with (HEALTHY / ACTION NEEDED / WARNINGS): the report's own headline. The
    step's `verdict` (clean / warn / action, what gates match) is unchanged."""
    return rep.headline


#: the verdicts a gate can match ("interrupted" stops the run before any gate is judged)
VERDICTS = ("clean", "warn", "action")


@register(
    "triage",
    args=TriageArgs,
    gate_keys=("ok", "verdict"),
    mutating=False,
    summary="the stall decision path",
    order=50,
    verdicts=VERDICTS,
)
def run(ctx: RunContext, a: TriageArgs) -> StepOutcome:
    from pdctl.ops.defaults import TRIAGE_INTERVAL_S, TRIAGE_WINDOW_S
    from pdctl.ops.triage import triage

    rep = triage(
        ctx.dep,
        window_s=TRIAGE_WINDOW_S if a.window_s is None else a.window_s,
        interval_s=TRIAGE_INTERVAL_S if a.interval_s is None else a.interval_s,
    )
    acting = [f for f in rep.findings if f.severity == "action"]
    if rep.partial:
        verdict = "interrupted"
    else:
        verdict = "action" if acting else ("warn" if rep.findings else "clean")
    titles = "; ".join(f.title for f in (acting or rep.findings))
    actions = list(dict.fromkeys(f.action for f in acting if f.action))
    ok = verdict in ("clean", "warn")
    head = triage_headline(rep)
    out = StepOutcome(
        ok,
        head + (f": {titles}" if titles else ""),
        exit_code=rep.exit_code() or (ExitCode.OK if ok else ExitCode.CHECK_FAILED),
        verdict=verdict,
        recommendation="; ".join(actions) or None,
        data=to_data(rep),
    )
    return stop_if_interrupted(rep.partial, out, rep.interrupted_by)
