"""The typed result every check returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


#: the commands a failed check may name as its next step
NEXT_PAIR_RESTART = "pdctl restart --pair"
NEXT_DEPLOY = "pdctl deploy --dry-run (what would change), then pdctl deploy"  # flag or env drift
NEXT_TRIAGE = "pdctl triage (which failure, and what to do about it)"  # transfer/bootstrap failures
NEXT_STATUS = "pdctl status (are the roles running?), then pdctl logs ROLE"


class Status(str, Enum):
    """A check's outcome. It compares, formats and serialises as its value ("pass"), as enum.StrEnum (3.11+) does."""

    PASS = "pass"
    WARN = "warn"  # observed something worth a look, not a failure (e.g. busy inflight)
    FAIL = "fail"
    SKIP = "skip"  # not applicable or not asked for
    UNKNOWN = "unknown"  # could not be asked (a host that did not answer): never read as stopped or failed

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


#: every status, the worst first: how a group of checks is summed up and ordered on screen
WORST_FIRST: tuple[Status, ...] = (Status.FAIL, Status.UNKNOWN, Status.WARN, Status.SKIP, Status.PASS)


@dataclass
class CheckResult:
    layer: str  # a final-health layer's name (pdctl.checks.layers), or a command's own
    target: str  # e.g. "prefill[0]@gpu1:30000" or "router[0]"
    name: str  # what was checked, e.g. "/health", "--disable-overlap-schedule"
    status: Status
    observed: str = ""  # what was found (masked if secret-looking)
    expected: str = ""  # what the inventory or the rule wanted
    detail: str = ""  # one line of why, or the recommended action
    data: dict[str, Any] = field(default_factory=dict)
    next_step: str = ""  # the pdctl command to run next when this check fails (e.g. NEXT_PAIR_RESTART)

    def __post_init__(self) -> None:
        # a URL's password has no secret-looking name to be masked by (RT_URL, HTTPS_PROXY): every judge's texts
        # are masked here, so no screen, JSON document, report or timeline line built from a result shows one
        from pdctl.secrets import mask_urls

        self.observed, self.expected, self.detail = (mask_urls(x) for x in (self.observed, self.expected, self.detail))

    @property
    def failed(self) -> bool:
        return self.status is Status.FAIL
