"""What a playbook run did: a StepRun per step (its status, gate verdict, exit code and outcome) and the RunResult
(every step, the exit code, the failed step, recommendations, final-health). As JSON data, the `pdctl run --json`
document and the audit record's steps."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from pdctl.checks.layers import in_order
from pdctl.playbook.outcome import StepOutcome
from pdctl.playbook.planning import Plan
from pdctl.serialize import JSON_OFF, json_key

if TYPE_CHECKING:
    from pdctl.checks.result import CheckResult
    from pdctl.ops.verify import HealthReport


@dataclass
class StepRun:
    index: int
    name: str
    action: str
    status: str  # passed | failed | recovered | skipped | not run | interrupted
    duration_s: float = 0.0
    gate: str = ""  # the gate verdict in words (with the action's summary when no gate is set)
    exit_code: int = 0
    handler_of: Optional[str] = None
    outcome: Optional[StepOutcome] = field(default=None, metadata=json_key("result"))
    note: str = field(default="", metadata=JSON_OFF)
    gate_brief: str = field(default="", metadata=JSON_OFF)  # the verdict alone, shown beside the summary ("ok")
    # the step's record: duration rounded, `handler_of` only for a handler, the outcome as `result`
    json_extra = (("duration_s", "duration_rounded"), "summary")
    json_omit_empty = ("handler_of", "result")

    @property
    def summary(self) -> str:
        return self.outcome.summary if self.outcome else self.note

    @property
    def duration_rounded(self) -> float:
        return round(self.duration_s, 3)


@dataclass
class RunResult:
    """As JSON data, the `pdctl run --json` document (secrets scrubbed)."""

    plan: Plan
    steps: list[StepRun] = field(default_factory=list)
    exit_code: int = 0
    failed_step: Optional[str] = None
    interrupted: bool = field(default=False, metadata=JSON_OFF)
    interrupted_by: str = field(default="Ctrl-C", metadata=JSON_OFF)  # or the signal: SIGTERM, SIGHUP
    recommendations: list[str] = field(default_factory=list)
    # the last final-health report a step produced; every one, in run order
    health: Optional[HealthReport] = field(default=None, metadata=json_key("final_health"))
    health_reports: list[HealthReport] = field(default_factory=list, metadata=JSON_OFF)
    run_id: str = field(default="", metadata=JSON_OFF)  # shared by the run's "started" record and its final one
    error: Optional[str] = field(default=None, metadata=JSON_OFF)  # the exception that ended the run, if one did
    json_extra = (("playbook", "plan.playbook.name"), "ok", ("result", "outcome_text"))
    json_mask = "plan.secrets"

    def health_by_layer(self) -> Optional[HealthReport]:
        """One HealthReport holding every layer any step checked, each from the last step that checked it, in
        layer order (health, e2e, transfer, flags, lineage, inflight). None when no step checked any."""
        if not self.health_reports:
            return None
        layers: dict[str, list[CheckResult]] = {}
        for rep in self.health_reports:
            layers.update(rep.layers)
        merged = copy.copy(self.health_reports[-1])
        merged.layers = {name: layers[name] for name in in_order(layers)}
        return merged

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.interrupted and self.error is None

    @property
    def outcome_text(self) -> str:
        if self.interrupted:
            at = next((x for x in self.steps if x.status == "interrupted"), None)
            return "interrupted" + (f" at step {at.index} '{at.name}'" if at else "") + f" ({self.interrupted_by})"
        if self.ok:
            return "ok"
        if self.failed_step is None:  # ended by an error outside any step
            return f"failed: {self.error}"
        s = next(x for x in self.steps if x.name == self.failed_step and x.status == "failed")
        return f"failed at step {s.index} '{s.name}': {s.gate.removeprefix('failed: ')}"
