"""The end-to-end probe (layer "e2e"): one chat completion through the router, status, latency AND content.

Why content: on the bundled engine (and on older SGLang builds users reported) a failed KV transfer comes back HTTP
200 with one token repeated ("aaaa aaaa aaaa"), and the seed's one-liner only looked at the status code. Real
SGLang 0.5.23 answers a failed transfer with an error, and a greedy model may repeat a word on its own, so the
repetition is judged only for an engine whose kind says it shows failures that way (pdctl.engines).
`judge_completion_content` is the pure part.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from pdctl.checks.http_util import client, describe_error, join, remote_url, request_ms, request_name
from pdctl.checks.result import NEXT_STATUS, NEXT_TRIAGE, CheckResult, Status

LAYER = "e2e"
CHAT_PATH = "/v1/chat/completions"


def _repeated_unit(s: str, min_repeats: int) -> str | None:
    """The shortest unit u with s == u * k for some k >= min_repeats, else None."""
    n = len(s)
    for size in range(1, n // min_repeats + 1):
        if n % size == 0 and s[:size] * (n // size) == s:
            return s[:size]
    return None


def judge_completion_content(
    text: str | None, completion_tokens: int | None = None, *, repeats_on_failure: bool = True
) -> tuple[bool, str]:
    """(ok, reason) for a completion's text. Pure.

    Not ok: empty or whitespace-only; or, for an engine that `repeats_on_failure`, when there are at least 3 tokens
    (or the token count is unknown), the failed-transfer symptom of one token repeated: the same word 3+ times and
    nothing else ("aaaa aaaa aaaa"), or one short unit repeated 3+ times with no separator ("aaaaaaaa", "!!!!").
    """
    if text is None or not text.strip():
        return False, "empty completion" + (f" ({completion_tokens} completion tokens)" if completion_tokens else "")
    if not repeats_on_failure:
        return True, "non-empty (this engine answers a failed transfer with an error, not a repeated token)"
    if completion_tokens is not None and completion_tokens < 3:
        return True, "non-empty (too few tokens to judge repetition)"
    s = text.strip()
    words = s.split()
    if len(words) >= 3 and len(set(words)) == 1:
        return False, f"one token repeated: {words[0][:20]!r} x{len(words)} (failed-transfer symptom)"
    if len(words) == 1 and len(s) >= 3:
        unit = _repeated_unit(s, 3)
        if unit is not None and len(unit) <= max(1, len(s) // 3):
            return False, f"one token repeated: {unit[:20]!r} x{len(s) // len(unit)} (failed-transfer symptom)"
    return True, "non-empty, not a single repeated token"


REQUEST_ID_HEADER = "X-Request-Id"


def probe_chat(
    router_base_url: str,
    model: str | None = None,
    prompt: str = "hi",
    max_tokens: int = 8,
    timeout: float = 30.0,
    *,
    target: str | None = None,
    repeats_on_failure: bool = True,
) -> CheckResult:
    """POST one chat completion to the router. Never raises: unreachable, non-200, bad JSON or bad content = FAIL.

    data: url, status_code, latency_ms, usage (prompt/completion tokens), finish_reason, content (first 200 chars).
    """
    url, named = join(router_base_url, CHAT_PATH), request_name(router_base_url, CHAT_PATH)  # named: not a tunnel port
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": False,
    }
    if model:
        body["model"] = model
    data: dict[str, Any] = {
        "url": remote_url(router_base_url, CHAT_PATH),
        "timeout_s": timeout,
        "model": model,
        "max_tokens": max_tokens,
    }
    tgt = target or router_base_url
    # pdctl's own canary, recognisable in the router's and the engines' logs (the pair canaries carry their rid)
    data["request_id"] = request_id = f"pdctl-e2e-{secrets.token_hex(6)}"
    c = client()
    t0 = time.monotonic()  # the request alone: the client is made before the clock starts
    try:
        r = c.post(url, json=body, timeout=timeout, headers={REQUEST_ID_HEADER: request_id})
    except Exception as e:
        data["latency_ms"] = request_ms(None, t0)
        cause = describe_error(e, timeout, router_base_url, since=t0)
        data["error"] = cause
        return CheckResult(
            LAYER,
            tgt,
            "chat completion",
            Status.FAIL,
            observed=cause,
            expected="HTTP 200, content",
            detail=f"POST {named}: {cause}",
            data=data,
            next_step=NEXT_STATUS,
        )
    latency = request_ms(r, t0)
    data.update(status_code=r.status_code, latency_ms=latency)
    if r.status_code != 200:
        snippet = r.text.strip().replace("\n", " ")[:200]
        return CheckResult(
            LAYER,
            tgt,
            "chat completion",
            Status.FAIL,
            observed=f"HTTP {r.status_code}",
            expected="HTTP 200",
            detail=f"POST {named} answered {r.status_code}: {snippet}",
            data=data,
            next_step=NEXT_TRIAGE,
        )
    try:
        doc = r.json()
        choice = doc["choices"][0]
        content = (choice.get("message") or {}).get("content")
        usage = doc.get("usage") or {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return CheckResult(
            LAYER,
            tgt,
            "chat completion",
            Status.FAIL,
            observed="HTTP 200, not a chat completion",
            expected="choices[0].message.content",
            detail=f"unexpected body: {r.text[:200]}",
            data=data,
            next_step=NEXT_TRIAGE,
        )
    data.update(usage=usage, finish_reason=choice.get("finish_reason"), content=(content or "")[:200])
    ok, reason = judge_completion_content(
        content, usage.get("completion_tokens"), repeats_on_failure=repeats_on_failure
    )
    shown = f"HTTP 200 in {latency:g} ms, {usage.get('completion_tokens', '?')} tokens"
    return CheckResult(
        LAYER,
        tgt,
        "chat completion",
        Status.PASS if ok else Status.FAIL,
        observed=shown,
        expected="HTTP 200, non-empty varied content",
        detail=reason,
        data=data,
        next_step="" if ok else NEXT_TRIAGE,
    )
