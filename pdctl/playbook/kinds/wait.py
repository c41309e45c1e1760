"""`action: wait`: a fixed duration, or until a read-only check passes its gate (bounded by `timeout`)."""

from __future__ import annotations

from typing import Annotated, Optional

import msgspec
from msgspec import Meta

from pdctl.errors import ExitCode, PdctlError, UsageError
from pdctl.playbook.gates import Gate, check_gate, evaluate_gate
from pdctl.playbook.kinds import REGISTRY, register
from pdctl.playbook.outcome import ArgProblems, Args, Data, RawArgs, RunContext, StepOutcome
from pdctl.playbook.steps import check_args, error_outcome, fill_args
from pdctl.playbook.vars import Scope
from pdctl.poll import poll_until
from pdctl.serialize import to_data

WAITABLE = ("verify", "inflight", "triage", "shell")  # what `until` may poll (no restart/deploy/storm)


class UntilSpec(Args):
    """The step `until` polls: its args and gate as a step's (checked by `check_until` first)."""

    action: str
    args: RawArgs = msgspec.field(default_factory=dict)
    gate: Gate = msgspec.field(default_factory=Gate)


class WaitArgs(Args):
    seconds: Optional[Annotated[float, Meta(gt=0, le=86400)]] = None
    until: Optional[UntilSpec] = None
    timeout: Annotated[float, Meta(gt=0, le=86400)] = 300.0
    interval: Annotated[float, Meta(gt=0, le=600)] = 2.0

    def __post_init__(self) -> None:
        if (self.seconds is None) == (self.until is None):
            raise ValueError("give exactly one of seconds (a fixed wait) or until (a check to pass)")


def check_until(args: RawArgs, with_values: bool) -> ArgProblems:
    """The step `until` polls: a waitable action, its args and its gate (at load time), its arg values (once
    substituted)."""
    until = args.get("until")
    if not isinstance(until, dict):
        return []
    action = until.get("action")
    kind = REGISTRY.get(action) if isinstance(action, str) else None
    if kind is None or kind.name not in WAITABLE:
        return [("args.until.action", f"expected a check to poll ({', '.join(WAITABLE)}), got {action!r}")]
    polled: Data = until.get("args") or {}
    gate: Data = until.get("gate") or {}
    problems: ArgProblems = []
    if not isinstance(polled, dict):
        problems.append(("args.until.args", f"expected a mapping, got {type(polled).__name__}"))
    else:
        problems += [(f"args.until.{f}", m) for f, m in check_args(kind, polled, with_values=with_values)]
    if with_values:  # a gate is checked at load time, as a step's is
        return problems
    if not isinstance(gate, dict):
        problems.append(("args.until.gate", f"expected a mapping, got {type(gate).__name__}"))
    else:
        problems += [(f"args.until.{f}", m) for f, m in check_gate(kind, gate)]
    return problems


def fill_until(raw: RawArgs, scope: Scope) -> RawArgs:
    """The args with their `${...}` filled in; the args of the step `until` polls the way its own kind takes them
    (a shell command's values as environment variables). Raises VarError."""
    from pdctl.playbook.vars import substitute

    out: RawArgs = {}
    for k, v in raw.items():
        if k != "until" or not isinstance(v, dict):
            out[k] = substitute(v, scope)
            continue
        action = substitute(v.get("action"), scope)
        kind = REGISTRY.get(action) if isinstance(action, str) else None
        polled = v.get("args")
        filled: RawArgs = {uk: substitute(uv, scope) for uk, uv in v.items() if uk != "args"}
        if isinstance(polled, dict) and kind is not None:
            filled["args"] = fill_args(kind, polled, scope)
        elif "args" in v:  # no kind to read them (refused when the playbook was loaded): left as written
            filled["args"] = polled
        out[k] = filled
    return out


def describe(a: WaitArgs) -> str:
    if a.until is None:
        return f"wait {a.seconds:g}s"
    return f"wait until {a.until.action} passes (every {a.interval:g}s, at most {a.timeout:g}s)"


@register(
    "wait",
    args=WaitArgs,
    gate_keys=("ok",),
    mutating=False,
    describe=describe,
    check=check_until,
    fill=fill_until,
    summary="a fixed duration, or until a read-only check passes (bounded)",
    order=70,
)
def run(ctx: RunContext, a: WaitArgs) -> StepOutcome:
    progress = ctx.dep.progress
    if a.until is not None:
        return wait_until(ctx, a.until, timeout=a.timeout, interval=a.interval)
    seconds = a.seconds if a.seconds is not None else 0.0  # one of the two is given (WaitArgs.__post_init__)
    poll_until(
        lambda: None,
        lambda _: False,
        timeout=seconds,
        interval=0.5,
        on_wait=lambda _, elapsed, limit: progress.waiting(f"{seconds:g}s to pass", elapsed, limit),
    )
    return StepOutcome(True, f"waited {seconds:g}s")


def wait_until(ctx: RunContext, spec: UntilSpec, *, timeout: float, interval: float) -> StepOutcome:
    """Run the step `spec` every `interval` until its gate passes or `timeout` expires (a misuse, UsageError,
    stops at once)."""
    progress = ctx.dep.progress
    kind = REGISTRY[spec.action]
    args = kind.convert(spec.args)
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
        timeout=timeout,
        interval=interval,
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
        f"{spec.action} did not pass within the wait timeout of {timeout:g}s ({tries} tries); last: {why}",
        exit_code=ExitCode.CHECK_FAILED,
        verdict=out.verdict,
        layers=out.layers,
        health=out.health,
        data={"last": to_data(out)},
    )
