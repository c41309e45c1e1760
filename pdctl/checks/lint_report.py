"""`pdctl lint`'s verdict over a whole deployment: every role's answer judged (flags, env, safety nets), the pair
and router rules across roles, the inventory's silences applied. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pdctl.checks.lint import effective_env, judge_command, judge_env
from pdctl.checks.lint_rules import Finding, silence
from pdctl.checks.lint_safety import BOOTSTRAP, WAITING, judge_pair, judge_router, judge_worker_safety


@dataclass
class RoleAnswer:
    """What one role's host said about that role's command line (the probe's item and its registry)."""

    label: str
    role: str  # prefill | decode | router
    kind: str  # sglang | bundled | a router kind (sglang-router, smg): who answers
    host: str
    python: str
    flags: list[str]  # the argv after `python -m MODULE`
    env: dict[str, str]
    item: Mapping[str, Any] | None  # the probe's answer for this role; None: no answer
    registry: Mapping[str, Any] | None = None
    shape_problem: str = ""  # why the command is not one pdctl renders (nothing to ask then)

    @property
    def version(self) -> str:
        return str((self.item or {}).get("version") or "")

    @property
    def parsed(self) -> Mapping[str, Any]:
        item = self.item or {}
        return item.get("parsed") or {} if (item.get("verdict") or {}).get("ok") else {}


@dataclass
class LintReport:
    findings: list[Finding]
    roles: list[dict[str, Any]] = field(default_factory=list)
    skipped: bool = False  # --skip-lint: nothing was asked
    seconds: float = 0.0  # wall time of asking the hosts
    json_extra = ("ok", ("blocking", "blocking_count"))

    @property
    def ok(self) -> bool:
        return not any(f.fails for f in self.findings)

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.blocks]

    @property
    def blocking_count(self) -> int:
        return len(self.blocking)


def _masked(findings: list[Finding], a: RoleAnswer) -> list[Finding]:
    """The role's secret values (secret-looking env names, --api-key and the like) scrubbed from what a parser
    echoed back into a finding."""
    from pdctl.secrets import mask_text, secret_values

    secrets = secret_values(a.env, a.flags)
    for f in findings:
        f.message, f.fix = mask_text(f.message, secrets), mask_text(f.fix, secrets)
        if "parser_says" in f.data:
            f.data["parser_says"] = mask_text(f.data["parser_says"], secrets)
    return findings


def judge_lint(
    answers: Sequence[RoleAnswer],
    *,
    site_env: Mapping[str, str],
    silenced: Sequence[tuple[str, str | None, str]],
    probe_timeout: float,
    restart_windows: Mapping[str, float] | None = None,
) -> LintReport:
    """Every finding for `answers` (in their order), then the cross-role rules, with the silences applied.
    `restart_windows`: a router's label -> its ready_timeout (what restart waits for it)."""
    findings: list[Finding] = []
    for a in answers:
        if a.shape_problem:
            findings.append(Finding("lint-unavailable", a.label, "command line", a.shape_problem))
            continue
        mine = judge_command(a.label, a.kind, a.flags, a.item)
        if a.role != "router" and a.item and a.item.get("available"):
            mine += judge_env(a.label, a.kind, a.env, a.registry, site_env, a.version)
            mine += judge_worker_safety(a.label, a.env, a.parsed, a.registry, a.version)
        findings += _masked(mine, a)
    workers = [(a.label, a.role, a.parsed, a.version) for a in answers if a.role != "router" and a.parsed]
    findings += judge_pair(workers)
    timeouts: list[
        tuple[str, str, float]
    ] = []  # what bounds a room: the prefill's bootstrap timeout, the decode's waiting timeout
    for a in answers:
        name = {"prefill": BOOTSTRAP, "decode": WAITING}.get(a.role)
        v = effective_env(name, a.env, a.registry) if name else None
        if name and isinstance(v, (int, float)) and not isinstance(v, bool):
            timeouts.append((a.label, name, float(v)))
    for a in answers:
        if a.role == "router":
            findings += judge_router(
                a.label,
                a.parsed,
                probe_timeout,
                timeouts,
                a.version,
                restart_window=(restart_windows or {}).get(a.label),
            )
    roles = [
        {
            "label": a.label,
            "role": a.role,
            "host": a.host,
            "python": a.python,
            "kind": a.kind,
            "version": a.version or None,
            "parsed": bool(a.parsed),
        }
        for a in answers
    ]
    return LintReport(silence(findings, silenced), roles)


def unchecked_warnings(report: LintReport, action: str) -> list[str]:
    """One warning per role the gate could not lint (rule lint-unavailable, unless the inventory silences it):
    the gate refuses only what it saw fail, so `action` goes ahead unchecked there and must say so, on screen and in
    --json, not only in the audit log. Pure."""
    why: dict[str, list[str]] = {}
    for f in report.findings:
        if f.rule == "lint-unavailable" and f.silenced is None:
            why.setdefault(f.role, []).append(f.message)
    return [
        f"lint could not check {role}: {'; '.join(msgs)}; {action} went ahead without checking its command line"
        for role, msgs in why.items()
    ]
