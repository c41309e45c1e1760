"""The inflight layer (optional): the PD queue gauges and decode progress sampled over a window, judged drained,
busy or pinned (ops/inflight.py samples, checks/inflight.py judges). Sequential in final-health: our own probes
would read as progress in its window. Its watch round takes one sample a tick, with the failure counters the
transfer layer's watch check follows."""

from __future__ import annotations

import time

from pdctl.checks.result import CheckResult
from pdctl.ops.context import Deployment
from pdctl.ops.layers.base import Gathering, LayerDef, register
from pdctl.ops.layers.seen import Seen, unreachable_hosts


def _run(g: Gathering) -> list[CheckResult]:
    from pdctl.ops.inflight import inflight_layer

    return inflight_layer(g.dep)


def inflight_round(dep: Deployment) -> Seen:
    """One read of every prefill's and decode's /metrics (ops.inflight.read_point on the monotonic clock): the PD
    queue gauges for the sliding window, and the failure counters; none while a prefill's or decode's host does not
    answer (the check is then unknown, not failed)."""
    from pdctl.checks.inflight import TARGET
    from pdctl.ops.inflight import read_point

    down = unreachable_hosts(dep, roles=("prefill", "decode"))
    if down:  # no sample, and the window is left as it was: a host that did not answer is no finding
        reason = "; ".join(f"host {h} did not answer: {w}" for h, w in down.items())
        return Seen(unknown={TARGET: f"unknown: {reason}"})
    return Seen(point=read_point(dep, 0.0, clock=time.monotonic))


register(LayerDef("inflight", run=_run, round=inflight_round))
