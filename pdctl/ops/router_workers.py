"""A router's worker list, through its worker API: read it, take a worker out, put one back.

Both router kinds: `GET /workers` -> {"workers": [{"id", "url", "worker_type", "is_healthy", "bootstrap_port",
...}]}; `DELETE /workers/{id}` and `POST /workers {"url", "worker_type", "bootstrap_port"}` answer 202 and take
effect in the background. So every change here is confirmed by reading the list again (polled, bounded), never by
sleeping. smg (pdctl.routers.smg) also lists each worker's `status`, keeps a deleted worker listed as `draining`
for ~5 s, and answers 409 to a POST for a URL it still lists: a worker is put back only once it is no longer listed.
The URLs are the ones the router was started with (pdctl.launch.worker_url from the router's host).
A router that does not answer is asked about through its host: dead or hung on a live host is a failure (exit 1),
unknown (exit 3) only when its host cannot be asked either (pdctl.checks.router_state.judge_unanswered_api).
"""

from __future__ import annotations

import json
from typing import Any

from pdctl.checks.rolling import back_in_service, listed
from pdctl.errors import PdctlError, StepFailed, UnreachableError
from pdctl.launch import worker_url
from pdctl.ops.context import Deployment
from pdctl.poll import poll_until
from pdctl.role_ref import RoleRef

API_TIMEOUT_S = 5.0
CONFIRM_TIMEOUT_S = 30.0  # the router applies a change within seconds; past this it is not applying it


def _call(
    dep: Deployment,
    r: int,
    method: str,
    path: str,
    body: Any = None,
    *,
    also_ok: tuple[int, ...] = (),
    ask_host: bool = True,
) -> Any:
    """One worker-API request to router r: the decoded JSON answer. Raises StepFailed (an answer that is not a
    success nor in `also_ok`, or no answer from a router whose host answers) or UnreachableError (no answer, and
    its host could not be asked either), both naming the router. `ask_host=False`: the caller has just read the
    router's service, so no answer is a StepFailed without asking its host again."""
    from httpx import HTTPError

    from pdctl.checks.http_util import client, describe_error, join

    base = dep.base_url("router", r)
    label = dep.inv.label("router", r)
    content = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} if content is not None else None
    try:
        resp = client().request(method, join(base, path), timeout=API_TIMEOUT_S, headers=headers, content=content)
    except HTTPError as e:
        cause = describe_error(e, API_TIMEOUT_S, base)
        if not ask_host:
            raise StepFailed(f"{label}: {method} {path} got no answer: {cause}") from None
        raise unanswered(dep, r, f"{method} {path}", cause) from None
    if resp.status_code >= 300 and resp.status_code not in also_ok:
        raise StepFailed(f"{label}: {method} {path} answered HTTP {resp.status_code}: {resp.text[:200]}")
    try:
        return resp.json()
    except ValueError:
        raise StepFailed(f"{label}: {method} {path} answered HTTP {resp.status_code} with no JSON") from None


def unanswered(dep: Deployment, r: int, request: str, cause: str) -> PdctlError:
    """The error for router r not answering `request`, judged by what its host says of its service (one status
    read): StepFailed when the host answers, UnreachableError when it cannot be asked."""
    from pdctl.checks.result import Status
    from pdctl.checks.router_state import judge_unanswered_api

    label = dep.inv.label("router", r)
    host_hint = None
    try:
        st = dep.status("router", r)
        running, service = st.active, st.detail
    except PdctlError as e:
        running, service, host_hint = None, e.message.splitlines()[0], e.hint
    status, message, hint = judge_unanswered_api(label, request, cause, running, service)
    if status is Status.UNKNOWN:
        return UnreachableError(message, target=label, hint=hint or host_hint)
    return StepFailed(message, hint=hint)


def workers(dep: Deployment, r: int, *, ask_host: bool = True) -> list[dict[str, Any]]:
    """Router r's worker list (GET /workers); `ask_host` as for _call."""
    got = _call(dep, r, "GET", "/workers", ask_host=ask_host)
    items = got.get("workers") if isinstance(got, dict) else None
    if not isinstance(items, list):
        raise StepFailed(f"{dep.inv.label('router', r)}: GET /workers has no 'workers' list")
    return [w for w in items if isinstance(w, dict)]


def url_of(dep: Deployment, r: int, role: str, i: int) -> str:
    """Worker (role, i)'s URL as router r knows it."""
    return worker_url(dep.inv, role, i, dep.instance("router", r).host)


def serving(dep: Deployment) -> dict[str, list[RoleRef]]:
    """router label -> the declared workers its list holds now and does not call unhealthy (the ones it routes
    to)."""
    out = {}
    for r in range(len(dep.inv.roles.router)):
        listed_now = workers(dep, r)
        out[dep.inv.label("router", r)] = [
            RoleRef(role, i)
            for role, i, _ in dep.inv.instances()
            if role != "router"
            and (entry := listed(listed_now, url_of(dep, r, role, i))) is not None
            and entry.get("is_healthy") is not False
            and entry.get("status", "ready") == "ready"
        ]
    return out


def take_out(dep: Deployment, role: str, i: int) -> float:
    """Remove worker (role, i) from every router and wait until no router lists it; seconds waited."""
    waited = 0.0
    for r in range(len(dep.inv.roles.router)):
        url = url_of(dep, r, role, i)
        entry = listed(workers(dep, r), url)
        if entry is None:
            continue  # already out of this router
        if entry.get("status") != "draining":  # smg: a delete already under way
            _call(dep, r, "DELETE", f"/workers/{entry['id']}")
        waited += _confirm(
            dep,
            r,
            lambda ws, u=url: listed(ws, u) is None,
            f"{dep.inv.label(role, i)} still listed by {dep.inv.label('router', r)}",
        )
    return waited


def put_back(dep: Deployment, role: str, i: int) -> float:
    """Add worker (role, i) to every router (a prefill with its bootstrap port) and wait until every router lists
    it as healthy; seconds waited."""
    waited = 0.0
    for r in range(len(dep.inv.roles.router)):
        url = url_of(dep, r, role, i)
        kind = dep.inv.router_kind(r)
        now = workers(dep, r)
        if not back_in_service(now, url, role):
            entry = listed(now, url)
            if entry is not None and entry.get("status") == "draining":
                # smg still drains it from an earlier DELETE: a POST now would be refused (409)
                waited += _confirm(
                    dep,
                    r,
                    lambda ws, u=url: listed(ws, u) is None,
                    f"{dep.inv.label(role, i)} still draining in {dep.inv.label('router', r)}",
                )
                entry = None
            if entry is None or not kind.readd_conflict:  # sglang-router replaces a listed worker; smg refuses
                body: dict[str, Any] = {"url": url, "worker_type": role}
                if role == "prefill":
                    body["bootstrap_port"] = dep.inv.bootstrap_port(dep.instance("prefill", i))
                # 409: listed again meanwhile (a router's own re-add); the wait below decides
                _call(dep, r, "POST", "/workers", body, also_ok=(409,) if kind.readd_conflict else ())
        waited += _confirm(
            dep,
            r,
            lambda ws, u=url: back_in_service(ws, u, role),
            f"{dep.inv.label(role, i)} not listed as healthy by {dep.inv.label('router', r)}",
        )
    return waited


def _confirm(dep: Deployment, r: int, done, what: str) -> float:
    w = poll_until(
        lambda: workers(dep, r),
        done,
        timeout=CONFIRM_TIMEOUT_S,
        interval=0.1,
        backoff=1.5,
        max_interval=1.0,
        timeout_name="the router's confirmation wait",
    )
    if not w.ok:
        raise StepFailed(f"{what} after {CONFIRM_TIMEOUT_S:.0f}s (GET /workers read again until then)")
    return w.elapsed
