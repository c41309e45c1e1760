"""Component health (layer "health"): a server's /health and the router's /readiness.

A green /health says little: SGLang answers it with a FAKE-bootstrap generation that never moves KV, so this layer
only says the process answers. The e2e and transfer layers say whether the pair works.
"""

from __future__ import annotations

import time
from typing import Any

from pdctl.checks.http_util import client, describe_error, join, remote_url, request_ms, request_name
from pdctl.checks.result import NEXT_STATUS, CheckResult, Status

LAYER = "health"


def probe_health(
    base_url: str, path: str = "/health", timeout: float = 4.0, *, target: str | None = None
) -> CheckResult:
    """GET base_url+path once. 200 = pass; any other status, refused or timeout = fail naming the URL and the cause.

    Never raises for an unhealthy or unreachable server; records latency_ms and status_code in data.
    """
    url, named = join(base_url, path), request_name(base_url, path)  # named: the role's address, not a tunnel port
    data: dict[str, Any] = {"url": remote_url(base_url, path), "timeout_s": timeout}
    c = client()
    t0 = time.monotonic()  # the request alone: the client is made before the clock starts
    try:
        r = c.get(url, timeout=timeout)
    except Exception as e:  # HTTP errors and a bad URL alike: the server is not healthy from here
        data["latency_ms"] = request_ms(None, t0)
        cause = describe_error(e, timeout, base_url, since=t0)
        data["error"] = cause
        return CheckResult(
            LAYER,
            target or base_url,
            path,
            Status.FAIL,
            observed=cause,
            expected="HTTP 200",
            detail=f"GET {named}: {cause}",
            data=data,
            next_step=NEXT_STATUS,
        )
    data["latency_ms"] = request_ms(r, t0)
    data["status_code"] = r.status_code
    if r.status_code == 200:
        return CheckResult(
            LAYER,
            target or base_url,
            path,
            Status.PASS,
            observed="HTTP 200",
            expected="HTTP 200",
            detail=f"{data['latency_ms']:g} ms",
            data=data,
        )
    body = r.text.strip().replace("\n", " ")[:160]
    return CheckResult(
        LAYER,
        target or base_url,
        path,
        Status.FAIL,
        observed=f"HTTP {r.status_code}",
        expected="HTTP 200",
        detail=f"GET {named} answered {r.status_code}" + (f": {body}" if body else ""),
        data=data,
        next_step=NEXT_STATUS,
    )


def judge_readiness(
    status_code: int,
    body: Any,
    *,
    require_all: bool = True,
    expect_workers: int | None = None,
    target: str = "router",
    url: str = "/readiness",
) -> CheckResult:
    """Pure judge of the router's /readiness answer {"status":"ready","healthy_workers":N,"total_workers":M}.

    pass: 200, ready, N == M (and M >= expect_workers when given); N < M: FAIL with require_all, else WARN;
    503 or anything else: FAIL (the router has no healthy prefill+decode pair).
    """
    data: dict[str, Any] = {"status_code": status_code}
    if isinstance(body, dict):
        data.update({k: body.get(k) for k in ("status", "healthy_workers", "total_workers") if k in body})
    healthy, total = data.get("healthy_workers"), data.get("total_workers")
    counts = f"{healthy}/{total} workers healthy" if healthy is not None and total is not None else ""
    if status_code != 200 or not isinstance(body, dict) or body.get("status") != "ready":
        shown = (body.get("status") if isinstance(body, dict) else None) or f"HTTP {status_code}"
        return CheckResult(
            LAYER,
            target,
            "/readiness",
            Status.FAIL,
            observed=" ".join(x for x in (str(shown), counts) if x),
            expected="ready, all workers healthy",
            detail=f"{url}: router not ready (needs at least one healthy prefill and one healthy decode)",
            data=data,
            next_step=NEXT_STATUS,
        )
    if isinstance(healthy, int) and isinstance(total, int):
        if expect_workers is not None and total < expect_workers:
            return CheckResult(
                LAYER,
                target,
                "/readiness",
                Status.FAIL,
                observed=counts,
                expected=f"{expect_workers} workers",
                detail=f"router knows only {total} of {expect_workers} declared workers",
                data=data,
                next_step=NEXT_STATUS,
            )
        if healthy < total:
            return CheckResult(
                LAYER,
                target,
                "/readiness",
                Status.FAIL if require_all else Status.WARN,
                observed=counts,
                expected=f"{total}/{total} workers healthy",
                detail=f"router ready but {total - healthy} worker(s) unhealthy",
                data=data,
                next_step=NEXT_STATUS,
            )
    return CheckResult(
        LAYER,
        target,
        "/readiness",
        Status.PASS,
        observed=f"ready {counts}".strip(),
        expected="ready, all workers healthy",
        data=data,
    )


def probe_router_ready(
    base_url: str,
    timeout: float = 4.0,
    *,
    require_all: bool = True,
    expect_workers: int | None = None,
    target: str | None = None,
) -> CheckResult:
    """GET the router's /readiness and judge it (see judge_readiness). Never raises; unreachable = FAIL."""
    url, named = join(base_url, "/readiness"), request_name(base_url, "/readiness")
    c = client()
    t0 = time.monotonic()  # the request alone: the client is made before the clock starts
    try:
        r = c.get(url, timeout=timeout)
    except Exception as e:
        cause = describe_error(e, timeout, base_url, since=t0)
        return CheckResult(
            LAYER,
            target or base_url,
            "/readiness",
            Status.FAIL,
            observed=cause,
            expected="ready",
            detail=f"GET {named}: {cause}",
            data={"url": remote_url(base_url, "/readiness"), "error": cause, "latency_ms": request_ms(None, t0)},
            next_step=NEXT_STATUS,
        )
    try:
        body = r.json()
    except ValueError:
        body = None
    res = judge_readiness(
        r.status_code,
        body,
        require_all=require_all,
        expect_workers=expect_workers,
        target=target or base_url,
        url=named,
    )
    res.data.update({"url": remote_url(base_url, "/readiness"), "latency_ms": request_ms(r, t0)})
    return res
