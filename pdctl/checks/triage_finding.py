"""One triage finding: what was observed, apart from what is inferred, and the action. Its own module because both
judges make findings: checks/triage.py and checks/triage_outputs.py (which triage.py imports)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Finding:
    title: str
    severity: str  # "action" (exit 1) or "warn"
    observed: list[str]
    inferred: list[str]
    action: str
    kind: str = ""
    next_step: str = ""  # the pdctl command to run next, when there is one
