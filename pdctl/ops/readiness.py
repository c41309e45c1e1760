"""Readiness gates, one per role, polled often (never a fixed sleep) until ready or the role's timeout expires.

- prefill: /health is 200 and its bootstrap server answers GET /health
- decode: /health is 200
- router: /readiness is 200 and reports every declared worker healthy
A role whose process dies while we wait fails at once with its log tail, rather than waiting out the timeout.
"""

from __future__ import annotations

from pdctl.errors import StepFailed
from pdctl.ops.context import Deployment
from pdctl.poll import poll_until

POLL_INTERVAL = 0.25


def _get(url: str, timeout: float):
    from httpx import HTTPError

    from pdctl.checks.http_util import client

    try:
        return client().get(url, timeout=timeout)
    except HTTPError as e:
        return e


def _ready_once(dep: Deployment, role: str, index: int) -> tuple[bool, str]:
    """One observation of readiness: (ready, what is still missing)."""
    base = dep.base_url(role, index)
    if role == "router":
        r = _get(f"{base}/readiness", 3.0)
        if isinstance(r, Exception):
            return False, f"router /readiness: {type(r).__name__}"
        want = len(dep.inv.roles.prefill) + len(dep.inv.roles.decode)
        try:
            body = r.json()
        except ValueError:
            body = {}
        healthy = body.get("healthy_workers")
        if r.status_code == 200 and (healthy is None or healthy >= want):
            return True, ""
        return False, f"router /readiness {r.status_code}, healthy workers {healthy}/{want}"
    r = _get(f"{base}/health", 5.0)
    if isinstance(r, Exception):
        return False, f"/health: {type(r).__name__}"
    if r.status_code != 200:
        return False, f"/health {r.status_code}"
    if role == "prefill":
        b = _get(f"{dep.bootstrap_url(index)}/health", 3.0)
        if isinstance(b, Exception) or b.status_code != 200:
            return False, "bootstrap server /health not answering"
    return True, ""


def wait_ready(dep: Deployment, role: str, index: int, *, timeout: float | None = None) -> float:
    """Block until the role instance is ready; return seconds waited. Raises StepFailed on timeout (naming
    ready_timeout and what is still missing) or as soon as its process is seen dead (with its log tail)."""
    inst = dep.instance(role, index)
    limit = timeout if timeout is not None else inst.ready_timeout
    label = dep.inv.label(role, index)
    next_alive_check = [0.0]

    def fail_if_dead() -> None:
        st = dep.status(role, index)
        if not st.active:
            tail = dep.services(inst.host).log_tail(dep.inv.service_name(role, index), lines=20)
            raise StepFailed(f"{label} exited while starting ({st.detail or 'not running'}); last log lines:\n{tail}")

    def still_waiting(seen: tuple[bool, str], elapsed: float, _limit: float) -> None:
        if elapsed >= next_alive_check[0]:  # a process that died fails at once, not after the timeout
            fail_if_dead()
            next_alive_check[0] = elapsed + 2.0
        dep.progress.waiting(f"{label} ready", elapsed, limit, seen[1])

    w = poll_until(
        lambda: _ready_once(dep, role, index),
        lambda seen: seen[0],
        timeout=limit,
        interval=POLL_INTERVAL,
        timeout_name="ready_timeout",
        on_wait=still_waiting,
    )
    if not w.ok:
        fail_if_dead()
        raise StepFailed(f"{label} not ready after {limit:.0f}s ({w.expired}): {w.value[1]}")
    return w.elapsed
