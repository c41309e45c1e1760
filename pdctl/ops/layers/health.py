"""The health layer: GET /health of every role, and each router's /readiness with every declared worker (plus
the router's own verdicts when it answers). Final-health and the watch's health round ask the same probes."""

from __future__ import annotations

from pdctl.checks.result import CheckResult, Status
from pdctl.ops.context import Deployment
from pdctl.ops.layers.base import Gathering, Judge, LayerDef, labelled, register
from pdctl.ops.layers.seen import Seen, per_instance


def health_probes(dep: Deployment, role: str, i: int) -> list[CheckResult]:
    """One instance's health checks: GET /health, and a router's /readiness with every declared worker."""
    from pdctl.checks.health import probe_health, probe_router_ready

    timeout = dep.inv.final_health.health_timeout
    base = dep.base_url(role, i)
    out = [probe_health(base, "/health", timeout)]
    if role == "router":
        workers = len(dep.inv.roles.prefill) + len(dep.inv.roles.decode)
        out.append(probe_router_ready(base, timeout=timeout, expect_workers=workers))
        if out[0].status is Status.PASS:  # a router that does not answer has said all there is
            from pdctl.ops.router_verdicts import router_verdicts

            out.extend(router_verdicts(dep, i))
    return out


def health_layer(dep: Deployment) -> list[CheckResult]:
    return labelled(dep.each_instance(lambda role, i: health_probes(dep, role, i)))


def _start(g: Gathering) -> Judge:
    return g.submit_layer("health", health_layer)


def health_round(dep: Deployment) -> Seen:
    """The watch's health round: the same probes, per target; and who holds the deployment lock (a deploy or
    restart under way: its own restarts are no outage to page on)."""
    from pdctl.ops.context import lock_holder

    seen = per_instance(dep, lambda role, i: health_probes(dep, role, i))
    seen.change = lock_holder(dep) or ""
    return seen


register(LayerDef("health", start=_start, round=health_round))
