"""What every step kind shares (the kinds themselves: `pdctl.playbook.kinds`, one module each): checking a step's
args, running a kind, and the outcomes built from an error or a final-health report. Nothing here prints.

Ctrl-C: storm, triage and inflight sampling catch KeyboardInterrupt themselves and return a partial report. A step
never turns such a report into an ordinary pass or failure: it raises StepInterrupted (a KeyboardInterrupt carrying
what was gathered), so the runner stops the run without running handlers or later steps.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Optional

import msgspec

from pdctl.checks.result import Status
from pdctl.errors import ExitCode, PdctlError
from pdctl.playbook.outcome import ArgProblems, Data, RawArgs, RunContext, StepKind, StepOutcome

if TYPE_CHECKING:
    from pdctl.ops.verify import HealthReport
    from pdctl.playbook.vars import Scope


def arg_names(args_type: type) -> tuple[str, ...]:
    """The argument names of a kind's args type (an `Args` Struct or a dataclass), in declared order."""
    if issubclass(args_type, msgspec.Struct):
        return tuple(f.encode_name for f in msgspec.structs.fields(args_type))
    if dataclasses.is_dataclass(args_type):
        return tuple(f.name for f in dataclasses.fields(args_type))
    raise TypeError(f"{args_type.__name__}: a step kind's args are an Args Struct or a dataclass")


def fill_args(kind: StepKind[Any], args: RawArgs, scope: Scope) -> RawArgs:
    """A step's args with their `${...}` filled in, the way its kind takes them (`StepKind.fill`; by default each
    value substituted as data). Pure; raises VarError for an unknown name or a value that cannot be passed."""
    from pdctl.playbook.vars import substitute

    if kind.fill is not None:
        return kind.fill(args, scope)
    return {k: substitute(v, scope) for k, v in args.items()}


def check_args(
    kind: StepKind[Any], args: RawArgs, *, with_values: bool, secrets: frozenset[str] = frozenset()
) -> ArgProblems:
    """(field, problem) for a step's args: unknown names, then the kind's own `check`. Without values (load time,
    `${...}` not yet substituted) that is all; with values the args are then converted to the kind's type, each
    problem said with the value found, scrubbed of `secrets` and never shown for a secret-looking field
    (struct_errors)."""
    from pdctl.secrets import mask_text
    from pdctl.struct_errors import field_problems, struct_problems

    names = arg_names(kind.args)
    out: ArgProblems = [
        (f"args.{k}", f"unknown argument of action {kind.name!r} (its arguments: {', '.join(names) or 'none'})")
        for k in args
        if k not in names
    ]
    if with_values and out:
        return out
    if kind.check is not None:  # its messages may quote a value: scrubbed as the conversion's are
        out += [(f, mask_text(m, secrets)) for f, m in kind.check(args, with_values)]
    if out or not with_values:
        return out
    problems = field_problems(args, kind.args, secrets=secrets)  # every arg's own problem, not just the first
    if not problems:
        try:
            kind.convert(args)
        except msgspec.ValidationError as err:
            problems = struct_problems(err, args, kind.args, secrets=secrets)
    return [(".".join(("args", *p.names)), p.message) for p in problems]


def run_kind(kind: StepKind[Any], ctx: RunContext, args: Any) -> StepOutcome:
    """Run one step's action. A PdctlError becomes a failed outcome carrying its exit code (message masked); nothing
    else is caught: KeyboardInterrupt (and StepInterrupted, a partial report after Ctrl-C) reaches the runner."""
    try:
        return kind.run(ctx, args)
    except PdctlError as e:
        return error_outcome(e, ctx.secrets)


def error_outcome(e: PdctlError, secrets: set[str] | frozenset[str] = frozenset()) -> StepOutcome:
    """A failed outcome from an error; its message and hint are masked (they may hold log tails with secrets)."""
    from pdctl.secrets import mask_text

    message = mask_text(e.message, secrets)
    hint = mask_text(e.hint, secrets) if e.hint else None
    return StepOutcome(
        False,
        message.splitlines()[0] if message else "",
        exit_code=e.exit_code,
        error=message,
        data={"hint": hint} if hint else {},
    )


class StepInterrupted(KeyboardInterrupt):
    """Ctrl-C reached a step whose op caught it and returned a partial report. A KeyboardInterrupt, so everything
    that stops on Ctrl-C stops on it; `outcome` is what the step had gathered (for the record)."""

    def __init__(self, outcome: Optional[StepOutcome] = None, signal_name: str = ""):
        super().__init__()
        self.outcome = outcome
        if signal_name:  # the run's record and screen say "interrupted (SIGTERM)", as for a step that did not catch it
            self.signal_name = signal_name


def stop_if_interrupted(partial: bool, outcome: StepOutcome, signal_name: str = "") -> StepOutcome:
    """`outcome`, unless the op's report is partial (Ctrl-C, or the signal named): then raises StepInterrupted
    carrying it."""
    if partial:
        raise StepInterrupted(outcome, signal_name)
    return outcome


def health_outcome(report: HealthReport, prefix: str = "final-health") -> tuple[bool, dict[str, bool], str]:
    """(ok, layer -> every check in it passed or warned, one-line summary) of a final-health report. A check that
    could not be asked (UNKNOWN) is no pass: its layer does not pass, and with nothing failed the summary says
    UNKNOWN naming it."""
    layers = {name: not any(r.failed or r.status is Status.UNKNOWN for r in rs) for name, rs in report.layers.items()}
    fails = report.failures()
    if report.ok:
        return True, layers, f"{prefix}: PASS ({', '.join(layers)})"
    if not fails:
        unknown = report.unknown()
        first = "; ".join(f"{r.target} {r.name}: {r.observed or r.detail}" for r in unknown[:3])
        return False, layers, f"{prefix}: UNKNOWN in {', '.join(dict.fromkeys(r.layer for r in unknown))} ({first})"
    first = "; ".join(f"{r.target} {r.name}: {r.observed or r.detail}" for r in fails[:3])
    # from the failures, not the layers: a baseline that was not recorded fails with every layer passing
    return False, layers, f"{prefix}: FAIL in {', '.join(dict.fromkeys(r.layer for r in fails))} ({first})"


def health_exit_code(report: HealthReport) -> ExitCode:
    """What `pdctl verify final-health` would exit with: 1 a check failed, 3 none failed but one could not be asked."""
    if report.failures():
        return ExitCode.CHECK_FAILED
    return ExitCode.UNREACHABLE if report.unknown() else ExitCode.OK


def health_step_outcome(summary: str, health: HealthReport, data: dict[str, Data]) -> StepOutcome:
    """The outcome of a step that ended with final-health (restart, deploy): `summary; final-health: ...`."""
    ok, layers, fh = health_outcome(health)
    return StepOutcome(
        ok,
        f"{summary}; {fh}",
        exit_code=health_exit_code(health),
        layers=layers,
        health=health,
        data=data,
    )


def describe_args(name: str, a: Any) -> str:
    """`NAME k=v ...` of the args that differ from their defaults: the plan's line for a kind without its own."""
    from pdctl.playbook.vars import show_value

    return (f"{name} " + " ".join(f"{k}={show_value(v)}" for k, v in changed_args(a).items())).strip()


def changed_args(a: Any) -> dict[str, Any]:
    """name -> value of each field of `a` (an `Args` Struct or a dataclass) that is not at its default."""
    out = {}
    if isinstance(a, msgspec.Struct):
        for f in msgspec.structs.fields(a):
            default = f.default_factory() if f.default_factory is not msgspec.NODEFAULT else f.default
            if default is msgspec.NODEFAULT or getattr(a, f.name) != default:
                out[f.encode_name] = getattr(a, f.name)
        return out
    for d in dataclasses.fields(a):
        default = d.default_factory() if d.default_factory is not dataclasses.MISSING else d.default
        if default is dataclasses.MISSING or getattr(a, d.name) != default:
            out[d.name] = getattr(a, d.name)
    return out
