"""The small types shared by step kinds, gates and the runner: what a step observed, what a kind is, and what a
step may use while it runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Optional

from pydantic import BaseModel, ConfigDict

ROLE = Literal["prefill", "decode", "router"]
KNOWN_LAYERS = ("health", "e2e", "transfer", "flags", "lineage", "inflight")


@dataclass
class StepOutcome:
    """What a step's action observed. `ok` is the action's own verdict; the gate decides whether the run goes on."""

    ok: bool
    summary: str
    exit_code: int = 0                   # what a failed gate exits with (1 = a check failed; from an error otherwise)
    verdict: Optional[str] = None        # storm / inflight / triage verdict
    layers: dict[str, bool] = field(default_factory=dict)   # verify layers: name -> no FAIL in it
    exit_status: Optional[int] = None    # shell: the command's exit code
    stdout: str = ""
    stderr: str = ""
    recommendation: Optional[str] = None
    health: Any = None                   # a HealthReport when the step ran final-health
    data: dict[str, Any] = field(default_factory=dict)
    error: Optional[str] = None          # the action raised: its message (the gate then fails)

    def to_dict(self, *, with_data: bool = True) -> dict[str, Any]:
        d = {"ok": self.ok, "summary": self.summary, "verdict": self.verdict, "layers": self.layers,
             "exit_status": self.exit_status, "recommendation": self.recommendation, "error": self.error}
        if self.exit_status is not None:
            d["stdout"], d["stderr"] = self.stdout[-2000:], self.stderr[-2000:]
        if with_data:
            d["data"] = self.data
        return {k: v for k, v in d.items() if v not in (None, {}, "")} | {"ok": self.ok}


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class StepKind:
    name: str
    args: type[BaseModel]
    gate_keys: tuple[str, ...]
    mutating: bool
    run: Callable[["RunContext", BaseModel], StepOutcome]
    describe: Callable[[BaseModel], str]
    summary: str = ""
    validate: Optional[Callable[[dict[str, Any], bool], list[tuple[str, str]]]] = None   # for open (extra=allow) args


@dataclass
class RunContext:
    """What a step can use: the open Deployment (one connection per host) and the run's flags."""

    dep: Any
    apply: bool = False
    secrets: set[str] = field(default_factory=set)   # secret values of the inventory, scrubbed from error messages
