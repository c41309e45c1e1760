"""`action: wait`: a fixed duration, or until a read-only check passes its gate (bounded by `timeout`)."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import Field, model_validator

from pdctl.errors import ExitCode, PdctlError, UsageError
from pdctl.playbook.gates import check_gate, evaluate_gate
from pdctl.playbook.kinds import REGISTRY, register
from pdctl.playbook.outcome import ArgProblems, RunContext, StepOutcome, _Args
from pdctl.playbook.steps import check_args, error_outcome
from pdctl.poll import poll_until
from pdctl.serialize import to_data

WAITABLE = ("verify", "inflight", "triage", "shell")  # what `until` may poll (no restart/deploy/storm)


class UntilSpec(_Args):
    action: str
    args: dict[str, Any] = Field(default_factory=dict)
    gate: dict[str, Any] = Field(default_factory=dict)


class WaitArgs(_Args):
    seconds: Optional[float] = Field(None, gt=0, le=86400)
    until: Optional[UntilSpec] = None
    timeout: float = Field(300.0, gt=0, le=86400)
    interval: float = Field(2.0, gt=0, le=600)

    @model_validator(mode="after")
    def _one(self) -> "WaitArgs":
        if (self.seconds is None) == (self.until is None):
            raise ValueError("give exactly one of seconds (a fixed wait) or until (a check to pass)")
        return self


def check_until(args: dict[str, Any], with_values: bool) -> ArgProblems:
    """The step `until` polls: a waitable action, its args and its gate (at load time), its arg values (once
    substituted)."""
    until = args.get("until")
    if not isinstance(until, dict):
        return []
    kind = REGISTRY.get(until.get("action", ""))
    if kind is None or kind.name not in WAITABLE:
        return [("args.until.action", f"expected a check to poll ({', '.join(WAITABLE)}), got {until.get('action')!r}")]
    problems = [(f"args.until.{f}", m) for f, m in check_args(kind, until.get("args") or {}, with_values=with_values)]
    if not with_values:
        problems += [(f"args.until.{f}", m) for f, m in check_gate(kind, until.get("gate") or {})]
    return problems


def describe(a: WaitArgs) -> str:
    if a.seconds is not None:
        return f"wait {a.seconds:g}s"
    return f"wait until {a.until.action} passes (every {a.interval:g}s, at most {a.timeout:g}s)"


@register(
    "wait",
    args=WaitArgs,
    gate_keys=("ok",),
    mutating=False,
    describe=describe,
    also_check=check_until,
    summary="a fixed duration, or until a read-only check passes (bounded)",
    order=70,
)
def run(ctx: RunContext, a: WaitArgs) -> StepOutcome:
    progress = ctx.dep.progress
    if a.seconds is not None:
        poll_until(
            lambda: None,
            lambda _: False,
            timeout=a.seconds,
            interval=0.5,
            on_wait=lambda _, elapsed, limit: progress.waiting(f"{a.seconds:g}s to pass", elapsed, limit),
        )
        return StepOutcome(True, f"waited {a.seconds:g}s")
    spec = a.until
    kind = REGISTRY[spec.action]
    args = kind.args.model_validate(spec.args)
    tries = 0

    def attempt() -> tuple[StepOutcome, bool, str]:
        nonlocal tries
        tries += 1
        try:
            out = kind.run(ctx, args)
        except UsageError:
            raise  # a misuse (e.g. no baseline recorded) does not get better by waiting
        except PdctlError as e:
            out = error_outcome(e, ctx.secrets)
        return (out, *evaluate_gate(spec.gate, out))

    w = poll_until(
        attempt,
        lambda t: t[1],
        timeout=a.timeout,
        interval=a.interval,
        timeout_name="timeout",
        on_wait=lambda t, elapsed, limit: progress.waiting(f"{spec.action} to pass", elapsed, limit, detail=t[2]),
    )
    out, _, why = w.value
    if w.ok:
        return StepOutcome(
            True,
            f"{spec.action} passed after {w.elapsed:.1f}s ({tries} tries): {why}",
            verdict=out.verdict,
            layers=out.layers,
            health=out.health,
        )
    return StepOutcome(
        False,
        f"{spec.action} did not pass within the wait timeout of {a.timeout:g}s ({tries} tries); last: {why}",
        exit_code=ExitCode.CHECK_FAILED,
        verdict=out.verdict,
        layers=out.layers,
        health=out.health,
        data={"last": to_data(out)},
    )
