"""The small types shared by step kinds, gates and the runner: what a step observed, what a kind is, and what a
step may use while it runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Optional

from pydantic import BaseModel, ConfigDict

from pdctl.serialize import JSON_OFF

ROLE = Literal["prefill", "decode", "router"]


@dataclass
class StepOutcome:
    """What a step's action observed. `ok` is the action's own verdict; the gate decides whether the run goes on.
    (Fields in the order of the JSON document.) As JSON data: empty values left out (`ok` always kept); stdout and
    stderr (their last 2000 characters) only for a command that exited."""

    ok: bool
    summary: str
    verdict: Optional[str] = None  # storm / inflight / triage verdict
    layers: dict[str, bool] = field(default_factory=dict)  # verify layers: name -> no FAIL in it
    exit_status: Optional[int] = None  # shell: the command's exit code
    recommendation: Optional[str] = None
    error: Optional[str] = None  # the action raised: its message (the gate then fails)
    stdout: str = ""
    stderr: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    # what a failed gate exits with (1 = a check failed; from an error otherwise); the step's record carries it
    exit_code: int = field(default=0, metadata=JSON_OFF)
    health: Any = field(default=None, metadata=JSON_OFF)  # a HealthReport when the step ran final-health
    json_extra = (("stdout", "stdout_shown"), ("stderr", "stderr_shown"))
    json_omit_empty = True

    @property
    def stdout_shown(self) -> Optional[str]:
        return None if self.exit_status is None else self.stdout[-2000:]

    @property
    def stderr_shown(self) -> Optional[str]:
        return None if self.exit_status is None else self.stderr[-2000:]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


ArgProblems = list[tuple[str, str]]  # (field, problem), e.g. ("args.window_s", "Input should be ...")


@dataclass(frozen=True)
class StepKind:
    """One action a step may name. Made by `pdctl.playbook.kinds.register`, one module per kind."""

    name: str
    args: type[BaseModel]  # its arguments (unknown keys refused unless the model allows extra)
    gate_keys: tuple[str, ...]  # the gates it understands (gates.GATE_SPECS)
    mutating: bool  # it changes the deployment
    run: Callable[["RunContext", BaseModel], StepOutcome]
    describe: Callable[[BaseModel], str]  # the command line the plan shows
    summary: str = ""
    validate: Optional[Callable[[dict[str, Any], bool], ArgProblems]] = None  # for open (extra=allow) args
    also_check: Optional[Callable[[dict[str, Any], bool], ArgProblems]] = None  # beyond the model (wait: its until)
    quoted_args: tuple[str, ...] = ()  # string args whose `${...}` values are shell-quoted when substituted
    order: int = 100  # its place in listings ("choose from ..."); then by name
    verdicts: tuple[str, ...] = ()  # what its outcome's `verdict` can be: the names a `verdict` gate may use


@dataclass
class RunContext:
    """What a step can use: the open Deployment (one connection per host) and the run's flags."""

    dep: Any
    apply: bool = False
    secrets: set[str] = field(default_factory=set)  # secret values of the inventory, scrubbed from error messages
