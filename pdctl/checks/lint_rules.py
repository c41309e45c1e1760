"""Every rule `pdctl lint` can fire: its id, severity, why it matters and where the docs explain it, plus the typed
finding a rule produces. docs/lint.md has one section per rule id (tests/unit/test_lint_checks.py keeps them in step).

Severities: "error" and "warning" fail `pdctl lint` (exit 1) unless the inventory silences the rule with a reason;
a "note" is said and never fails. A rule that `blocks` means the role's command line would not start on its host,
or the prefill/decode pair it makes could never transfer: deploy and restart refuse it (exit 2) before anything is
stopped, and no inventory can silence it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

DOC = "docs/lint.md"


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str  # error | warning | note
    reason: str
    blocks: bool = False  # the line would not parse, or its pair cannot transfer: deploy/restart refuse

    @property
    def doc(self) -> str:
        return f"{DOC}#{self.id}"


_RULES = [
    Rule(
        "flag-unknown",
        "error",
        "the installed parser does not know this flag: the server would exit 2 at start",
        blocks=True,
    ),
    Rule(
        "flag-ambiguous",
        "error",
        "an abbreviation that matches several flags: the parser refuses it (the seed's "
        "--cuda-graph-max-bs against sglang 0.5.23)",
        blocks=True,
    ),
    Rule("flag-value", "error", "the parser refuses the flag's value (type or choice)", blocks=True),
    Rule("flag-rejected", "error", "the installed server-args validation refuses the command line", blocks=True),
    Rule(
        "flag-abbreviated",
        "warning",
        "an abbreviation the parser accepts silently today: the live-flags check "
        "cannot match it and a later version adding a flag makes it ambiguous",
    ),
    Rule(
        "flag-conflict",
        "error",
        "several flags write one setting with different values (aliases such as --tp-size and "
        "--tensor-parallel-size, or --x and --no-x): the parser keeps the last and drops the others silently",
    ),
    Rule("flag-repeated", "warning", "several flags write one setting with the same value: one is enough"),
    Rule(
        "lint-unavailable",
        "error",
        "the host's interpreter could not run the installed parser or registry, so nothing was checked there",
    ),
    Rule(
        "env-unknown",
        "error",
        "an SGLANG_* name that neither the installed registry nor the package's own reads know: it is silently ignored",
    ),
    Rule(
        "env-case",
        "error",
        "an env name that differs from one SGLang reads only in letter case: environment names are "
        "case-sensitive, so it is silently ignored",
    ),
    Rule("env-value", "error", "the value does not parse as the registry's type: SGLang warns and uses the default"),
    Rule("env-deprecated", "warning", "a deprecated name: read today through a fallback that a release will drop"),
    Rule("env-site-specific", "note", "declared by the inventory as read only by a site's own build"),
    Rule(
        "waiting-timeout",
        "warning",
        "SGLANG_DISAGGREGATION_WAITING_TIMEOUT off or huge: a decode room whose prefill "
        "died waits that long before it fails",
    ),
    Rule(
        "bootstrap-timeout",
        "warning",
        "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT off or huge: a sender stuck in Bootstrapping is never failed",
    ),
    Rule(
        "heartbeat-window",
        "warning",
        "heartbeat interval x max failures off or huge: decode keeps a dead prefill's info and its rooms that long",
    ),
    Rule(
        "health-generation-off",
        "warning",
        "health generation disabled or bypassed: /health answers 200 without running the scheduler",
    ),
    Rule(
        "metrics-off",
        "warning",
        "--enable-metrics missing on a worker: /metrics is 404 and transfer_failed cannot be read",
    ),
    Rule(
        "tp-rank0-metrics",
        "note",
        "tp > 1 without --enable-metrics-for-all-schedulers: only rank 0's scheduler metrics are visible",
    ),
    Rule(
        "transfer-backend-mismatch",
        "error",
        "prefill and decode use different KV transfer backends: no transfer can succeed",
        blocks=True,
    ),
    Rule(
        "pd-mismatch",
        "error",
        "prefill and decode disagree on a setting the KV transfer needs (model, tokenizer, page size, KV cache "
        "dtype, dtype): SGLang refuses at the first transfer or the decode computes on the wrong KV",
        blocks=True,
    ),
    Rule(
        "pd-tp-differs",
        "warning",
        "prefill and decode run different attention TP sizes: SGLang reslices standard attention's KV, but refuses "
        "MXFP8 KV, DeepSeek DSpark and MiniMax sparse attention at the first transfer (the client then hangs)",
    ),
    Rule("version-mismatch", "warning", "prefill and decode run different engine versions"),
    Rule(
        "router-health-window",
        "warning",
        "router health interval x failure threshold longer than the declared "
        "probe window: the router keeps sending to a dead worker meanwhile",
    ),
    Rule(
        "timeout-order",
        "warning",
        "timeouts out of order: the router gives up before the engine's bootstrap + "
        "waiting timeouts fail a stuck transfer (then only a router timeout shows), before the probe, or its "
        "circuit breaker stays open past the restart window or is off",
    ),
]
RULES: dict[str, Rule] = {r.id: r for r in _RULES}
FAILING = ("error", "warning")


@dataclass
class Finding:
    rule: str
    role: str  # the role's label, or "prefill/decode" for a pair rule
    subject: str  # the flag, env name or setting it is about
    message: str
    fix: str = ""  # what to write instead
    version: str = ""  # the version of the package that answered
    silenced: str | None = None  # the inventory's reason, when silenced
    data: dict[str, Any] = field(default_factory=dict)
    json_extra = ("severity", "blocks", "reason", "doc")

    @property
    def severity(self) -> str:
        return RULES[self.rule].severity

    @property
    def reason(self) -> str:
        return RULES[self.rule].reason

    @property
    def doc(self) -> str:
        return RULES[self.rule].doc

    @property
    def blocks(self) -> bool:
        return RULES[self.rule].blocks

    @property
    def fails(self) -> bool:
        return self.silenced is None and self.severity in FAILING


def silence(findings: list[Finding], silenced: Sequence[tuple[str, str | None, str]]) -> list[Finding]:
    """Mark findings the inventory silences: (rule, role or None for every role, reason). A blocking rule is never
    silenced (the inventory refuses that: pdctl.inventory). Returns the same list."""
    for f in findings:
        for rule, role, reason in silenced:
            if f.rule == rule and (role is None or f.role == role or f.role.startswith(f"{role}[")):
                f.silenced = reason
    return findings
