"""The transfer layer: transfer_failed / bootstrap_failed of every prefill and decode are 0, or have not risen
since the recorded baseline. The watch judges these counters from its inflight samples (checks/layers.py:
cadence "inflight", ops/layers/inflight.py), so this layer has no round of its own; a worker whose /metrics could
not be read is judged by the same checks.transfer.judge_unread in both."""

from __future__ import annotations

from pdctl.checks.result import CheckResult
from pdctl.ops.baseline import read_transfer_counters
from pdctl.ops.context import Deployment
from pdctl.ops.layers.base import Gathering, Judge, LayerDef, TransferBaseline, register
from pdctl.ops.layers.seen import why


def transfer_layer(dep: Deployment, baseline: TransferBaseline | None) -> list[CheckResult]:
    """Every worker's failure counters judged (against `baseline` when given); a worker whose /metrics could not
    be read is a failed check saying why (its host answered: final-health stops at one that does not)."""
    from pdctl.checks.transfer import judge_transfer, judge_unread

    results: list[CheckResult] = []
    for label, m in read_transfer_counters(dep).items():
        if isinstance(m, Exception):
            results.append(judge_unread(label, why(m), getattr(m, "hint", None)))
            continue
        results.extend(judge_transfer(label, m, baseline.get(label) if baseline is not None else None))
    return results


def _start(g: Gathering) -> Judge:
    return g.submit_layer("transfer", lambda dep: transfer_layer(dep, g.baseline))


register(LayerDef("transfer", start=_start))
