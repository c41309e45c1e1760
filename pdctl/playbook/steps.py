"""What every step kind shares (the kinds themselves: `pdctl.playbook.kinds`, one module each): checking a step's
args, running a kind, and the outcomes built from an error or a final-health report. Nothing here prints.

Ctrl-C: storm, triage and inflight sampling catch KeyboardInterrupt themselves and return a partial report. A step
never turns such a report into an ordinary pass or failure: it raises StepInterrupted (a KeyboardInterrupt carrying
what was gathered), so the runner stops the run without running handlers or later steps.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ValidationError

from pdctl.errors import ExitCode, PdctlError
from pdctl.playbook.outcome import ArgProblems, RunContext, StepKind, StepOutcome
from pdctl.yamlfile import plain_problem


def check_args(
    kind: StepKind, args: dict[str, Any], *, with_values: bool, secrets: frozenset[str] = frozenset()
) -> ArgProblems:
    """(field, problem) for the args. Without values (load time, `${...}` not yet substituted) only keys are
    checked; with values the whole model is validated, each value shown scrubbed of `secrets` and never for a
    secret-looking field (yamlfile.plain_problem). Then the kind's own `also_check`, if any."""
    out: ArgProblems = []
    model = kind.args
    if model.model_config.get("extra") == "forbid":
        for k in args:
            if k not in model.model_fields:
                out.append(
                    (
                        f"args.{k}",
                        f"unknown argument of action {kind.name!r} "
                        f"(its arguments: {', '.join(model.model_fields) or 'none'})",
                    )
                )
    elif kind.validate is not None:  # its messages may quote a value: scrubbed as the model's problems are
        from pdctl.secrets import mask_text

        return [(f, mask_text(m, secrets)) for f, m in kind.validate(args, with_values)]
    if not out and with_values:
        try:
            model.model_validate(args)
        except ValidationError as err:
            for e in err.errors():
                loc = ".".join(str(p) for p in e["loc"])
                msg, got_txt = plain_problem(e, secrets=secrets)  # a secret-named arg's value is never shown
                out.append((f"args.{loc}" if loc else "args", msg + got_txt))
    # at load time every problem is listed; with values the kind's own check needs args that validated
    if kind.also_check is not None and not (with_values and out):
        out += kind.also_check(args, with_values)
    return out


def run_kind(kind: StepKind, ctx: RunContext, args: BaseModel) -> StepOutcome:
    """Run one step's action. A PdctlError becomes a failed outcome carrying its exit code (message masked); nothing
    else is caught: KeyboardInterrupt (and StepInterrupted, a partial report after Ctrl-C) reaches the runner."""
    try:
        return kind.run(ctx, args)
    except PdctlError as e:
        return error_outcome(e, ctx.secrets)


def error_outcome(e: PdctlError, secrets: set[str] = frozenset()) -> StepOutcome:
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


def health_outcome(report, prefix: str = "final-health") -> tuple[bool, dict[str, bool], str]:
    """(ok, layer -> no FAIL in it, one-line summary) of a final-health report."""
    layers = {name: not any(r.failed for r in rs) for name, rs in report.layers.items()}
    fails = report.failures()
    if report.ok:
        return True, layers, f"{prefix}: PASS ({', '.join(layers)})"
    first = "; ".join(f"{r.target} {r.name}: {r.observed or r.detail}" for r in fails[:3])
    # from the failures, not the layers: a baseline that was not recorded fails with every layer passing
    return False, layers, f"{prefix}: FAIL in {', '.join(dict.fromkeys(r.layer for r in fails))} ({first})"


def health_step_outcome(summary: str, health, data: dict[str, Any]) -> StepOutcome:
    """The outcome of a step that ended with final-health (restart, deploy): `summary; final-health: ...`."""
    ok, layers, fh = health_outcome(health)
    return StepOutcome(
        ok,
        f"{summary}; {fh}",
        exit_code=ExitCode.OK if ok else ExitCode.CHECK_FAILED,
        layers=layers,
        health=health,
        data=data,
    )


def describe_args(name: str, a: BaseModel) -> str:
    """`NAME k=v ...` of the args given (unset defaults left out): the plan's line for a kind without its own."""
    from pdctl.playbook.vars import show_value

    d = a.model_dump(exclude_unset=True)
    d.update(getattr(a, "model_extra", None) or {})
    return (f"{name} " + " ".join(f"{k}={show_value(v)}" for k, v in d.items())).strip()
