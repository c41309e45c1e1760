"""What `pdctl watch` keeps of each check, pair and round (checks.watch_state holds them), and the one document made
of them: `--json`'s WatchSnapshot, written with pdctl.serialize.to_data (its keys are a contract: docs/watch.md).
The heal's audit evidence reuses these parts. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from pdctl.checks.result import Status
from pdctl.checks.watch_events import CheckChanged


@dataclass
class CheckState:
    cadence: str
    layer: str
    target: str
    check: str
    status: Status  # pass | warn | fail | unknown (a skipped check is not kept)
    observed: str = ""
    expected: str = ""
    detail: str = ""
    since: float = 0.0  # unix time of the last status change
    next_step: str = ""

    def line(self, t: float, deployment: str) -> CheckChanged:
        """Its timeline line (docs/watch.md)."""
        return CheckChanged(
            t, deployment, self.cadence, self.layer, self.target, self.check, self.status, self.observed, self.expected
        )

    def turn_unknown(self, why: str, t: float) -> None:
        """Its target (or its worker's /metrics) could not be asked: unknown, saying why."""
        self.status, self.observed, self.detail, self.since = Status.UNKNOWN, why, why, t


@dataclass
class PairState:
    prefill: str  # labels
    decode: str
    status: Status = Status.UNKNOWN  # pass | fail | unknown
    latency_s: float | None = None
    consecutive_failures: int = 0


@dataclass
class RoundInfo:
    last_complete: float | None = None  # unix time the last complete round ended
    seconds: float | None = None  # how long it took
    ok: bool | None = None  # no failed check in it
    rounds: int = 0
    skipped: int = 0  # ticks skipped while it ran
    error: str | None = None  # why its last round raised (its checks are not known), None once one ends


@dataclass(frozen=True)
class InflightSummary:
    verdict: str  # the inflight judge's verdict (drained, busy, pinned, ...), "unknown" before one is judged
    summary: str
    pinned: bool
    pinned_seconds: float


@dataclass(frozen=True)
class FailureCount:
    target: str
    kind: str  # transfer | bootstrap
    count: float  # since the watch started, across counter resets


@dataclass(frozen=True)
class LineageHazard:
    prefill: str
    decode: str
    hazard: str


@dataclass(frozen=True)
class WatchSnapshot:
    """Everything the watch knows at one time: `--json`'s document (docs/watch.md) via pdctl.serialize.to_data."""

    deployment: str
    verdict: Status
    exit_code: int
    started: float
    checks: list[CheckState]  # failing first
    targets_up: dict[str, bool]
    unknown_targets: list[str]
    round_errors: dict[str, str]  # cadence -> why its last round raised
    unknown_why: dict[str, str]  # unknown target -> why
    inflight: InflightSummary
    pairs: list[PairState]
    failures_since_start: list[FailureCount]
    lineage_hazards: list[LineageHazard]
    rounds: dict[str, RoundInfo]
    heals: dict[str, int]  # outcome -> count
    heal_budget_exhausted: bool
