"""The transfer baseline (`verify final-health --record-baseline`): recorded only from every worker's counters.

A later `--since-baseline` judges a worker missing from the baseline by its raw counters (a series not in the
baseline counts from 0), so a baseline read while a worker was down, or one read from nothing, would quietly turn
"not grown since" back into "must be 0" and wipe the good baseline. So a read that missed any worker's counters
records nothing, keeps the file as it was, and is a failed check naming each worker and why.
Pure: `baseline_snapshot(reads)` and `BaselineRecord.checks()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from pdctl.checks.metric_names import ENABLE_METRICS_HINT, METRICS_ON_WITNESSES, metrics_on
from pdctl.checks.result import NEXT_STATUS, CheckResult, Status
from pdctl.checks.transfer import counters_of
from pdctl.serialize import JSON_OFF

LAYER = "baseline"  # not a final-health layer: what `--record-baseline` did, reported beside them


def baseline_snapshot(reads: Mapping[str, Any]) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """(label -> failure counters, label -> why not read) from label -> MetricSet or the exception that stopped
    its read. A worker whose /metrics shows no SGLang metrics at all is not read: its baseline would say nothing;
    one whose failure counters have no series yet (none failed since it started) records them as 0. Pure."""
    snapshot: dict[str, dict[str, float]] = {}
    unread: dict[str, str] = {}
    for label, m in reads.items():
        if m is None or isinstance(m, BaseException):
            unread[label] = _first_line(m)
            continue
        if not metrics_on(m):
            unread[label] = f"no {' / '.join(METRICS_ON_WITNESSES)} in its /metrics ({ENABLE_METRICS_HINT})"
            continue
        snapshot[label] = counters_of(m)
    return snapshot, unread


def _first_line(e: BaseException | None) -> str:
    if e is None:
        return "not read"
    text = getattr(e, "message", None) or str(e) or type(e).__name__
    return text.splitlines()[0]


@dataclass
class BaselineRecord:
    """What `--record-baseline` did: recorded to `path`, or not (the file there kept as it was) and why."""

    path: str
    recorded: bool
    workers: list[str]  # the workers whose counters were read (and saved, when recorded)
    unread: dict[str, str] = field(default_factory=dict)  # worker -> why its counters could not be read
    error: str = ""  # why nothing was written although every worker was read
    kept: bool = False  # not recorded, and a baseline from before is still there
    snapshot: dict[str, dict[str, float]] = field(default_factory=dict, metadata=JSON_OFF)
    json_extra = ("summary",)

    @property
    def summary(self) -> str:
        if self.recorded:
            return f"transfer baseline recorded: {self.path} (counters of {len(self.workers)} worker(s))"
        return f"transfer baseline NOT recorded: {self._left()}"

    def _left(self) -> str:
        return f"{self.path} kept as it was" if self.kept else f"nothing written to {self.path} (none there yet)"

    def checks(self) -> list[CheckResult]:
        """One FAIL per worker not read (or one for a failed write) when nothing was recorded; none when it was."""
        if self.recorded:
            return []
        detail = f"baseline not recorded: {self._left()}"
        if self.error:
            return [
                CheckResult(
                    LAYER,
                    self.path,
                    "transfer baseline",
                    Status.FAIL,
                    observed=self.error,
                    expected="written",
                    detail=detail,
                )
            ]
        return [
            CheckResult(
                LAYER,
                label,
                "transfer baseline",
                Status.FAIL,
                observed=why,
                expected="every worker's counters read",
                detail=detail,
                next_step=NEXT_STATUS,
            )
            for label, why in self.unread.items()
        ]
