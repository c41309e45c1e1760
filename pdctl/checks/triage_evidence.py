"""The evidence that tells triage's look-alikes apart. A degraded bootstrap and the seed's update_status race both
show a pair that serves nothing with every /health green; what differs is how a transfer ends: after a lone
restart it fails fast (the prefill answers an error in milliseconds, its transfer_failed counter rises, no prefill
holds a room), in the race a room is held Transferring and the request behind it never ends. And the router's
circuit breakers open after either: they are a consequence of failing requests, not a component that is down.
Pure functions over typed observations; checks/triage.py judges with them."""

from __future__ import annotations

import json
import re

from pdctl.checks.metric_names import DECODE_PREALLOC_QUEUE, DECODE_TRANSFER_QUEUE, PREFILL_INFLIGHT_QUEUE
from pdctl.checks.result import CheckResult

#: what a canary leg says when it had no answer within its slot (ops/pairs.py)
_NO_ANSWER = ("no response within", "timed out")


def router_view(r: CheckResult) -> bool:
    """A router's view of a worker (its breaker for it, its readiness of it, its exhausted retries), as opposed to
    a process's own /health. Pure."""
    return r.target.startswith("router[") and r.name != "/health"


def names_stopped(r: CheckResult, stopped: list[str]) -> bool:
    """A router's check of a worker that is not running ("worker decode[0] (http://...)", its breaker), or its
    /readiness while one is not: a consequence of the stop. Pure."""
    shorts = [label.split("@", 1)[0] for label in stopped if not label.startswith("router[")]
    if not shorts:
        return False
    return r.name == "/readiness" or any(re.search(rf"\b{re.escape(s)}(\s|$)", r.name) for s in shorts)


def _canary_ms(r: CheckResult) -> float | None:
    times = [v for k in ("prefill_ms", "decode_ms") if isinstance(v := r.data.get(k), (int, float))]
    return max(times) if times else None


def canary_timed_out(r: CheckResult) -> bool:
    """A failed pair canary that got no answer within its slot (a held room), not an error answer. Pure."""
    return any(w in r.observed for w in _NO_ANSWER)


def fast_canary_failures(pairs: list[CheckResult]) -> list[str]:
    """'canary prefill[0] -> decode[0]: prefill: HTTP 500 KV transfer failed (answered in 17 ms)' for each failed
    pair canary that was answered with an error: a transfer failing fast. Pure."""
    lines = []
    for r in pairs:
        if r.failed and not canary_timed_out(r):
            ms = _canary_ms(r)
            lines.append(f"canary {r.target}: {r.observed}" + (f" (answered in {ms:g} ms)" if ms is not None else ""))
    return lines


def fastest_failure_ms(pairs: list[CheckResult]) -> float | None:
    """How fast the quickest failed canary was answered, when one was answered with an error. Pure."""
    times = [ms for r in pairs if r.failed and not canary_timed_out(r) and (ms := _canary_ms(r)) is not None]
    return min(times) if times else None


def held_canaries(pairs: list[CheckResult]) -> list[str]:
    """'canary prefill[0] -> decode[0]: no response within 30s' for each failed canary without an answer. Pure."""
    return [f"canary {r.target}: {r.observed}" for r in pairs if r.failed and canary_timed_out(r)]


def prefill_rooms_held(holders: dict[str, dict[str, float]]) -> list[str]:
    """'prefill[0]@h:30000 holds 1 room in its inflight queue' for each prefill whose inflight queue is not empty at
    the end of the window (a room held Transferring: the race's mark). Pure."""
    return [
        f"{label} holds {g[PREFILL_INFLIGHT_QUEUE]:g} room(s) in its inflight queue"
        for label, g in holders.items()
        if g.get(PREFILL_INFLIGHT_QUEUE)
    ]


def decode_waiting(holders: dict[str, dict[str, float]]) -> list[str]:
    """'decode[0]@h:30002 waits on 1 request(s) for KV (transfer queue 1)' for each decode whose prealloc or
    transfer queue is not empty at the end of the window. Pure."""
    lines = []
    for label, g in holders.items():
        n = (g.get(DECODE_PREALLOC_QUEUE) or 0) + (g.get(DECODE_TRANSFER_QUEUE) or 0)
        if n:
            lines.append(f"{label} waits on {n:g} request(s) for their KV")
    return lines


def consequence_line(results: list[CheckResult]) -> str:
    """The router-side failures in one line: 'consistent with that: router[0]@h:30001 breaker open for prefill[0],
    decode[0]; retries exhausted: decode 2'. Pure."""
    by_target: dict[str, list[str]] = {}
    for r in results:
        worker = re.sub(r"\s*\(.*\)$", "", r.name)  # "breaker prefill[0] (http://...)" -> "breaker prefill[0]"
        by_target.setdefault(r.target, []).append(f"{worker}: {r.observed}")
    parts = [f"{t} " + ", ".join(items) for t, items in by_target.items()]
    return "consistent with that, the router's view: " + "; ".join(parts)


def error_message(detail: str) -> tuple[str, str]:
    """('POST ... answered 503', 'No available servers: ...') for a detail that ends in an HTTP error body with a
    message; (detail, "") otherwise. Pure."""
    head, sep, body = detail.partition(": {")
    if sep:
        try:
            doc = json.loads("{" + body)
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            inner = doc.get("error", doc)
            message = inner.get("message", "") if isinstance(inner, dict) else inner
            if message:
                return head, str(message)
    return detail, ""


def short_reason(detail: str, limit: int = 120) -> str:
    """The error message inside an HTTP error's detail ('... answered 503: {"error":{"message":"No available
    servers: ..."}}' -> 'No available servers: ...'), else the detail's first line; at most `limit` characters
    with the cut said ('...'). The whole text stays in --json and -v. Pure."""
    message = error_message(detail)[1]
    text = message or (detail.splitlines()[0] if detail else "")
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."
