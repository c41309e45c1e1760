"""The typed result every check returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


class Status(str, Enum):
    PASS = "pass"
    WARN = "warn"      # observed something worth a look, not a failure (e.g. busy inflight)
    FAIL = "fail"
    SKIP = "skip"      # not applicable or not asked for


@dataclass
class CheckResult:
    layer: str                 # e.g. "health", "e2e", "transfer", "flags", "lineage", "inflight"
    target: str                # e.g. "prefill[0]@gpu1:30000" or "router[0]"
    name: str                  # what was checked, e.g. "/health", "--disable-overlap-schedule"
    status: Status
    observed: str = ""         # what was found (masked if secret-looking)
    expected: str = ""         # what the inventory or the rule wanted
    detail: str = ""           # one line of why, or the recommended action
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status is Status.FAIL

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        return d
