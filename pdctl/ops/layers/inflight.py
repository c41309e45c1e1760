"""The inflight layer (optional): the PD queue gauges and decode progress sampled over a window, judged drained,
busy or pinned (ops/inflight.py samples, checks/inflight.py judges). Sequential in final-health: our own probes
would read as progress in its window. Its watch round takes one sample a tick, with the failure counters the
transfer layer's watch check follows; a worker it could not read fails that check when its host answers."""

from __future__ import annotations

import time

from pdctl.checks.result import CheckResult
from pdctl.ops.context import Deployment
from pdctl.ops.layers.base import Gathering, LayerDef, register
from pdctl.ops.layers.seen import Seen, targets_on, unreachable_hosts


def _run(g: Gathering) -> list[CheckResult]:
    from pdctl.ops.inflight import inflight_layer

    return inflight_layer(g.dep)


def inflight_round(dep: Deployment) -> Seen:
    """One read of every prefill's and decode's /metrics (ops.inflight.read_point on the monotonic clock): the PD
    queue gauges for the sliding window, and the failure counters; none while a prefill's or decode's host does not
    answer (the check is then unknown, not failed). A worker whose /metrics could not be read in the sample is a
    failed transfer check (checks.transfer.judge_unread, as in final-health) when its host still answers, and an
    unknown target when its host stopped answering meanwhile: `checks` and `unknown` of the Seen."""
    from pdctl.checks.inflight import TARGET
    from pdctl.ops.inflight import read_point

    roles = ("prefill", "decode")
    down = unreachable_hosts(dep, roles=roles)
    if down:  # no sample, and the window is left as it was: a host that did not answer is no finding
        reason = "; ".join(f"host {h} did not answer: {w}" for h, w in down.items())
        return Seen(unknown={TARGET: f"unknown: {reason}"})
    seen = Seen(point=read_point(dep, 0.0, clock=time.monotonic))
    if seen.point is not None and seen.point.errors:
        seen.checks, seen.unknown = unread_workers(dep, seen.point.errors)
    return seen


def unread_workers(dep: Deployment, unread: dict[str, str]) -> tuple[list[CheckResult], dict[str, str]]:
    """The workers of `unread` (label -> why its /metrics could not be read) judged: a failed transfer check for each
    whose host answers now (its server did not: dead, hung, or erring), an unknown target (label -> why) for each
    whose host does not. Asks the hosts again: the read may have failed because one stopped answering."""
    from pdctl.checks.transfer import judge_unread

    gone = targets_on(dep, unreachable_hosts(dep, roles=("prefill", "decode")), roles=("prefill", "decode"))
    checks = [judge_unread(label, text) for label, text in sorted(unread.items()) if label not in gone]
    return checks, {label: gone[label] for label in unread if label in gone}


register(LayerDef("inflight", run=_run, round=inflight_round))
