"""What a router itself says of its workers (part of the health layer): their listed state from its worker API and,
where its kind exposes them (pdctl.routers), its circuit breakers and the requests it gave up on, from its metrics
port. The judges are pdctl.checks.router_state."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pdctl import launch
from pdctl.checks.result import CheckResult, Status
from pdctl.errors import PdctlError
from pdctl.ops.context import Deployment, probe_address

if TYPE_CHECKING:  # httpx is loaded only when a probe runs
    from pdctl.checks.http_util import RoleURL


def router_metrics_url(dep: Deployment, index: int) -> RoleURL:
    """Router[index]'s metrics endpoint base, as this machine reaches it (an SSH tunnel when the host says so)."""
    from pdctl.checks.http_util import RoleURL

    inst = dep.instance("router", index)
    t, probe = dep.transport(inst.host), probe_address(launch.metrics_host(dep.inv, index))
    port = launch.metrics_port(dep.inv, index)
    url = t.http_base_url(port, host=probe)
    return RoleURL(
        url,
        label=f"{dep.inv.label('router', index)} metrics",
        host=inst.host,
        remote=f"{probe}:{port}",
        tunnel=t.http_tunnel,
        failure=lambda since: t.tunnel_failure(url, since),
    )


def router_verdicts(dep: Deployment, index: int) -> list[CheckResult]:
    """What router[index] itself says of its workers: each one's listed state (GET /workers) and, where the kind
    exposes them, its circuit breakers and the requests it gave up on (its metrics port)."""
    from httpx import HTTPError

    from pdctl.checks.http_util import client, describe_error
    from pdctl.checks.router_state import (
        RETRIES_EXHAUSTED,
        judge_breakers,
        judge_retries_exhausted,
        judge_worker_states,
    )
    from pdctl.checks.sampling import fetch_metrics

    label = dep.inv.label("router", index)
    timeout = dep.inv.final_health.health_timeout
    host = dep.instance("router", index).host
    names = {
        launch.worker_url(dep.inv, role, i, host): f"{role}[{i}]"
        for role, i, _ in dep.inv.instances()
        if role != "router"
    }
    base = dep.base_url("router", index)
    try:
        body = client().get(f"{base}/workers", timeout=timeout).json()
    except (HTTPError, ValueError) as e:
        cause = describe_error(e, timeout, base) if isinstance(e, HTTPError) else "not JSON"
        return [
            CheckResult(
                "health",
                label,
                "/workers",
                Status.FAIL,
                observed=cause,
                expected="the worker list",
                detail=f"GET /workers of {label}: {cause}",
            )
        ]
    out = judge_worker_states(label, body, names)
    kind = dep.inv.router_kind(index)
    if kind.breaker_metric:
        murl = router_metrics_url(dep, index)
        try:
            metrics = fetch_metrics(murl, timeout, families=[kind.breaker_metric, RETRIES_EXHAUSTED])
        except PdctlError as e:
            return out + [
                CheckResult(
                    "health",
                    label,
                    "circuit breakers",
                    Status.FAIL,
                    observed=e.message.splitlines()[0],
                    expected="the router's metrics",
                    detail=f"{kind.name}'s breakers are visible only on its metrics port "
                    f"({murl.remote}); set --prometheus-port in the router's args if "
                    "it is not the default 29000",
                )
            ]
        out += judge_breakers(label, metrics, kind.breaker_metric, names) + judge_retries_exhausted(label, metrics)
    return out
