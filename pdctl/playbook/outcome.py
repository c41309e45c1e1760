"""The small types shared by step kinds, gates and the runner: what a step observed, what a kind is, and what a
step may use while it runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generic, Literal, Optional, TypeVar, Union

import msgspec

from pdctl.serialize import JSON_OFF

ROLE = Literal["prefill", "decode", "router"]

if TYPE_CHECKING:
    from pdctl.ops.context import Deployment
    from pdctl.ops.verify import HealthReport

    #: YAML data as a playbook holds it: a step's args before its kind's type reads them, vars, a gate as written
    Data = Union[None, bool, int, float, str, list["Data"], dict[str, "Data"]]
else:
    Data = Any  # msgspec reads no recursive alias; the type checker does
RawArgs = dict[str, Data]


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
    data: dict[str, Data] = field(default_factory=dict)  # what the op returned, as JSON data (to_data)
    # what a failed gate exits with (1 = a check failed; from an error otherwise); the step's record carries it
    exit_code: int = field(default=0, metadata=JSON_OFF)
    health: Optional[HealthReport] = field(default=None, metadata=JSON_OFF)  # when the step ran final-health
    json_extra = (("stdout", "stdout_shown"), ("stderr", "stderr_shown"))
    json_omit_empty = True

    @property
    def stdout_shown(self) -> Optional[str]:
        return None if self.exit_status is None else self.stdout[-2000:]

    @property
    def stderr_shown(self) -> Optional[str]:
        return None if self.exit_status is None else self.stderr[-2000:]


class Args(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The base of a step kind's arguments: a msgspec Struct (the inventory's library); an unknown key is refused.
    A constraint is `Annotated[float, Meta(gt=0)]`; a check across fields is `__post_init__` raising
    `pdctl.struct_errors.field_error(FIELD, ...)` (or a ValueError, said of the args as a whole)."""


ArgProblems = list[tuple[str, str]]  # (field, problem), e.g. ("args.window_s", "Expected float > 0 (got -1)")

A = TypeVar("A")


@dataclass(frozen=True)
class StepKind(Generic[A]):
    """One action a step may name. Made by `pdctl.playbook.kinds.register`, one module per kind. `args` is its
    arguments' type: an `Args` Struct, or a dataclass (what `msgspec.convert` builds from a mapping)."""

    name: str
    args: type[A]  # its arguments (an unknown key is refused: `steps.arg_names`)
    gate_keys: tuple[str, ...]  # the gates it understands (fields of gates.Gate)
    mutating: bool  # it changes the deployment
    run: Callable[["RunContext", A], StepOutcome]
    describe: Callable[[A], str]  # the command line the plan shows
    summary: str = ""
    # its own check of the args, in its words, before they are converted (at load time `with_values` is False: the
    # `${...}` are not yet substituted); with values, a problem found here spares the conversion (storm: its values
    # against StormConfig; wait: the step its `until` polls)
    check: Optional[Callable[[RawArgs, bool], ArgProblems]] = None
    # how its args take their `${...}` values, fill(raw_args, vars.Scope) (`steps.fill_args`; typed Any here: vars
    # imports this module); None: each substituted as data, a whole `${x}` keeping its type. A kind whose arg is
    # shell text passes the values as environment variables (`shell_refs`)
    fill: Optional[Callable[[RawArgs, Any], RawArgs]] = None
    order: int = 100  # its place in listings ("choose from ..."); then by name
    verdicts: tuple[str, ...] = ()  # what its outcome's `verdict` can be: the names a `verdict` gate may use

    def convert(self, args: RawArgs) -> A:
        """The typed args from substituted ones (lax as YAML is: "8" for 8). Raises msgspec.ValidationError;
        `steps.check_args` says the problems in words first."""
        return msgspec.convert(args, self.args, strict=False)


@dataclass
class RunContext:
    """What a step can use: the open Deployment (one connection per host) and the run's flags."""

    dep: Deployment
    apply: bool = False
    secrets: set[str] = field(default_factory=set)  # secret values of the inventory, scrubbed from error messages
