"""The router's live configuration. sglang-router rewrites its process title ("sglang::router"), so its flags
cannot be read from /proc/PID/cmdline; its /workers answer is the live truth of which workers it routes to."""

from __future__ import annotations

from typing import Any, Mapping

from pdctl.checks.result import CheckResult, Status


def title_rewritten(argv: list[str]) -> bool:
    """True when the cmdline no longer shows the launch flags (setproctitle)."""
    return not any(a.startswith("--") for a in argv)


def judge_router_env(label: str, env: Mapping[str, str] | None, declared: Mapping[str, str]) -> list[CheckResult]:
    """The router's declared env: both router kinds zero their environ when they retitle themselves, so an empty one
    says nothing (a warning per declared name: not verified), never "unset"."""
    from pdctl.checks.flags import judge_flags

    if env:
        return judge_flags(label, [], env, {}, declared)
    return [
        CheckResult(
            "flags",
            label,
            f"env:{name}",
            Status.WARN,
            observed="unreadable",
            expected="declared",
            detail="the router zeroes /proc/PID/environ when it sets its process title: not verified",
        )
        for name in declared
    ]


def judge_router_workers(
    label: str, body: dict[str, Any] | None, prefill: list[tuple[str, int]], decode: list[str]
) -> list[CheckResult]:
    """Every declared prefill (url, bootstrap port) and decode url must be registered with the router (health is the
    health layer's job; an unhealthy registered worker passes here with a note), and nothing undeclared."""
    if not isinstance(body, dict):
        return [
            CheckResult(
                "flags",
                label,
                "/workers",
                Status.FAIL,
                observed="no answer",
                detail="could not read the router's /workers",
            )
        ]
    seen = {w.get("url"): w for w in body.get("workers", [])}
    out = []
    for url, bport in prefill:
        w = seen.get(url)
        if w is None or w.get("worker_type") != "prefill":
            out.append(
                CheckResult(
                    "flags",
                    label,
                    f"prefill {url}",
                    Status.FAIL,
                    observed="not registered",
                    expected=f"prefill {url} bootstrap {bport}",
                    detail="drift: router does not route to it",
                )
            )
        elif w.get("bootstrap_port") not in (None, bport):
            out.append(
                CheckResult(
                    "flags",
                    label,
                    f"prefill {url}",
                    Status.FAIL,
                    observed=f"bootstrap {w.get('bootstrap_port')}",
                    expected=f"bootstrap {bport}",
                    detail="drift: wrong bootstrap port",
                )
            )
        else:
            out.append(
                CheckResult(
                    "flags",
                    label,
                    f"prefill {url}",
                    Status.PASS,
                    observed="registered",
                    expected=f"bootstrap {bport}",
                    detail="healthy" if w.get("is_healthy") else "registered, not healthy",
                )
            )
    for url in decode:
        w = seen.get(url)
        ok = w is not None and w.get("worker_type") == "decode"
        out.append(
            CheckResult(
                "flags",
                label,
                f"decode {url}",
                Status.PASS if ok else Status.FAIL,
                observed="registered" if ok else "not registered",
                expected="registered",
                detail="" if ok else "drift: router does not route to it",
            )
        )
    declared = {u for u, _ in prefill} | set(decode)
    for url, w in seen.items():
        if url not in declared:
            out.append(
                CheckResult(
                    "flags",
                    label,
                    f"{w.get('worker_type', 'worker')} {url}",
                    Status.FAIL,
                    observed="registered",
                    expected="not in the inventory",
                    detail="drift: undeclared worker",
                )
            )
    return out
