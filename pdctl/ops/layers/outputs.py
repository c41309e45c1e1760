"""The outputs layer (optional): `pdctl verify outputs` with its defaults, as final-health rows (ops/outputs.py sends,
checks/outputs.py judges). Sequential and last: its 30 concurrent sessions would show in every other layer."""

from __future__ import annotations

from pdctl.checks.result import CheckResult
from pdctl.ops.layers.base import Gathering, LayerDef, register


def _run(g: Gathering) -> list[CheckResult]:
    from pdctl.checks.outputs import outputs_rows
    from pdctl.ops.outputs import verify_outputs

    rep = verify_outputs(g.dep)
    return outputs_rows(rep.sessions, rep.pairs, rep.pd_use, rep.verdict)


register(LayerDef("outputs", run=_run))
