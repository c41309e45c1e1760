"""The router's own verdicts on its workers (layer "health"): what it lists each worker as, and its circuit breakers.

A router can hold a worker out of rotation while `/readiness` says ready: smg 1.13 opens a worker's breaker after
failed requests (the seed's degraded bootstrap) and shows it only in `smg_worker_cb_state` (0 closed, 1 open,
2 half-open) and in `GET /workers`' `status` (ready / not_ready / draining / pending); sglang-router 0.3.2 shows only
`is_healthy`. Each worker the router does not route to is a failed check naming the worker. Pure judges; the gather
is pdctl.ops.layers.health.health_probes.
"""

from __future__ import annotations

from typing import Any, Mapping

from pdctl.checks.metrics import MetricSet
from pdctl.checks.result import NEXT_TRIAGE, CheckResult, Status
from pdctl.checks.rolling import same_url

LAYER = "health"
BREAKER_STATES = {0: "closed", 1: "open", 2: "half-open"}
RETRIES_EXHAUSTED = "smg_worker_retries_exhausted_total"


def _name(url: str, names: Mapping[str, str]) -> str:
    """'decode[0] (http://127.0.0.1:30002)' for a declared worker's URL, the URL alone otherwise."""
    label = next((lab for u, lab in names.items() if same_url(u, url)), None)
    return f"{label} ({url})" if label else url


def judge_worker_states(router: str, body: Any, names: Mapping[str, str]) -> list[CheckResult]:
    """One check per worker the router lists: it passes when the router routes to it (healthy and, where the router
    says a status, `ready`). `names`: worker URL as the router knows it -> the worker's label. A body without a
    worker list is one failed check (the router answered something else)."""
    items = body.get("workers") if isinstance(body, dict) else None
    if not isinstance(items, list):
        return [
            CheckResult(
                LAYER,
                router,
                "/workers",
                Status.FAIL,
                observed="no worker list",
                expected="the router's worker list",
                detail="GET /workers answered no 'workers' list",
            )
        ]
    out = []
    for w in (x for x in items if isinstance(x, dict)):
        url = str(w.get("url", ""))
        status = w.get("status")
        healthy = w.get("is_healthy") is not False
        shown = str(status) if status is not None else ("healthy" if healthy else "unhealthy")
        ok = healthy and status in (None, "ready")
        what = {
            "draining": "being removed (draining): gets no new requests",
            "pending": "being added (pending): gets no requests yet",
            "not_ready": "not ready: the router's health checks fail on it",
        }.get(str(status), "unhealthy: gets no requests")
        out.append(
            CheckResult(
                LAYER,
                router,
                f"worker {_name(url, names)}",
                Status.PASS if ok else Status.FAIL,
                observed=shown,
                expected="ready" if status is not None else "healthy",
                detail="" if ok else f"the router lists {w.get('worker_type', 'worker')} {_name(url, names)} as {what}",
                data={"url": url, "worker_type": w.get("worker_type"), "status": status, "is_healthy": healthy},
                next_step="" if ok else NEXT_TRIAGE,
            )
        )
    return out


def judge_breakers(router: str, metrics: MetricSet, metric: str, names: Mapping[str, str]) -> list[CheckResult]:
    """One check per worker the router keeps a circuit breaker for: open is a failed check (the router sends it
    nothing, whatever /readiness says), half-open a warning (it is trying the worker again). No series at all is
    one pass: the router has not yet sent a request through any breaker."""
    samples = metrics.samples(metric)
    if not samples:
        return [
            CheckResult(
                LAYER,
                router,
                "circuit breakers",
                Status.PASS,
                observed="none tripped",
                expected="closed",
                detail=f"{metric}: no series yet",
            )
        ]
    out = []
    for s in samples:
        url = str(s.labels.get("worker", ""))
        state = BREAKER_STATES.get(int(s.value), f"state {s.value:g}")
        status = {"closed": Status.PASS, "half-open": Status.WARN}.get(state, Status.FAIL)
        detail = (
            ""
            if status is Status.PASS
            else (
                f"the router's circuit breaker for {_name(url, names)} is {state}: it sends that worker "
                f"{'nothing' if state == 'open' else 'a trial request only'} although /readiness may say ready "
                "(failed requests through it: a broken pair?)"
            )
        )
        out.append(
            CheckResult(
                LAYER,
                router,
                f"breaker {_name(url, names)}",
                status,
                observed=state,
                expected="closed",
                detail=detail,
                data={"url": url, "state": state},
                next_step="" if status is Status.PASS else NEXT_TRIAGE,
            )
        )
    return out


def judge_retries_exhausted(router: str, metrics: MetricSet) -> list[CheckResult]:
    """Requests the router gave up on after every retry, since it started, by worker type: a warning when any
    (the counter never goes down, so this says "it happened", not "it happens now": the watch judges its rise)."""
    per_type: dict[str, float] = {}
    for s in metrics.samples(RETRIES_EXHAUSTED):
        kind = str(s.labels.get("worker_type", "?"))
        per_type[kind] = per_type.get(kind, 0.0) + s.value
    total = sum(per_type.values())
    if not total:
        return [CheckResult(LAYER, router, "retries exhausted", Status.PASS, observed="0", expected="0")]
    shown = ", ".join(f"{k} {v:g}" for k, v in sorted(per_type.items()) if v)
    return [
        CheckResult(
            LAYER,
            router,
            "retries exhausted",
            Status.WARN,
            observed=shown,
            expected="0",
            detail=f"the router gave up on {total:g} request(s) after every retry since it started",
            data={"per_worker_type": per_type},
        )
    ]


def judge_unanswered_api(
    router: str, request: str, cause: str, running: bool | None, service: str = ""
) -> tuple[Status, str, str | None]:
    """The verdict on a router that did not answer a worker-API request (`cause`: "connection refused", "timed out
    after 5s", ...), by what its host says of its service: `running` None when the host could not be asked either
    (UNKNOWN: nothing is known), else FAIL: a router on a live host that does not answer is dead or hung, a finding
    like any stopped role. `service`: the service manager's detail. Returns (status, message, hint). Pure."""
    if running is None:
        return Status.UNKNOWN, f"unknown: {router}: {request}: {cause}; its host could not be asked: {service}", None
    if not running:
        return (
            Status.FAIL,
            f"{router} is not running ({service or 'its service is stopped'}): {request}: {cause}",
            "start it: `pdctl deploy` starts what is not running (a router holds no KV state)",
        )
    return (
        Status.FAIL,
        f"{router} runs but does not answer its worker API: {request}: {cause}",
        "read `pdctl logs router`; `pdctl restart --role router` restarts it (a router holds no KV state)",
    )
