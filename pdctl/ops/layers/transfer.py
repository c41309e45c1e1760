"""The transfer layer: transfer_failed / bootstrap_failed of every prefill and decode are 0, or have not risen
since the recorded baseline. The watch judges these counters from its inflight samples (checks/layers.py:
cadence "inflight"), so this layer has no round of its own."""

from __future__ import annotations

from pdctl.checks.result import CheckResult, Status
from pdctl.ops.baseline import read_transfer_counters
from pdctl.ops.context import Deployment
from pdctl.ops.layers.base import Gathering, Judge, LayerDef, TransferBaseline, register


def transfer_layer(dep: Deployment, baseline: TransferBaseline | None) -> list[CheckResult]:
    """Every worker's failure counters judged (against `baseline` when given); a worker whose /metrics could not
    be read is a failed check saying why."""
    from pdctl.checks.transfer import judge_transfer

    results: list[CheckResult] = []
    for label, m in read_transfer_counters(dep).items():
        if isinstance(m, Exception):
            hint = getattr(m, "hint", None)
            results.append(
                CheckResult(
                    "transfer",
                    label,
                    "/metrics",
                    Status.FAIL,
                    observed=str(m).splitlines()[0],
                    detail="could not read metrics" + (f"; {hint}" if hint else ""),
                )
            )
            continue
        results.extend(judge_transfer(label, m, baseline.get(label) if baseline is not None else None))
    return results


def _start(g: Gathering) -> Judge:
    return g.submit_layer("transfer", lambda dep: transfer_layer(dep, g.baseline))


register(LayerDef("transfer", start=_start))
