"""One triage finding: what was observed, apart from what is inferred, and the action. Its own module because both
judges make findings: checks/triage.py and checks/triage_outputs.py (which triage.py imports)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Finding:
    title: str
    severity: str  # "action" (exit 1) or "warn"
    observed: list[str]
    inferred: list[str]
    action: str
    kind: str = ""
    next_step: str = ""  # the pdctl command to run next, when there is one
    # the other causes this evidence excludes, each with its evidence ("the update_status race: transfers fail in
    # 17 ms and no prefill holds a room"), so an on-call reader sees why the finding is not the look-alike
    ruled_out: list[str] = field(default_factory=list)


def recommended_step(findings: list[Finding]) -> str:
    """The one command to run next: the first finding that needs action and names a command (findings come most
    fundamental first), else the first that names one; "" when none does. Pure."""
    for wanted in ("action", None):
        for f in findings:
            if f.next_step and (wanted is None or f.severity == wanted):
                return f.next_step
    return ""
