"""Run a playbook's plan (`planning.plan`: vars substituted, args checked, `when` evaluated): the steps in order.

Each step's action gives a StepOutcome; its gate decides whether the run goes on. On a failed gate, the step's
`on_failure` says what happens: `stop` (the default: later steps are not run), `continue` (the failure still sets
the exit code), or `{run: HANDLER}` (run the handler step; if its gate passes the failure is recovered and the run
goes on; if the handler is skipped by its `when` or fails, the run stops). The run's exit code is that of the first
failed gate that was not recovered: the failed action's own code (1 for a failed check, 3 unreachable, 4 refused).
Ctrl-C (a KeyboardInterrupt, or a step whose op returned a partial report after Ctrl-C) ends the run at once: no
handler and no later step runs, the run is recorded as interrupted and its exit code is 130.
Every run (not a dry run) appends one audit record, also when it fails or is interrupted; a run with a mutating step
first appends a "started" record with the same `run` id (so a killed run leaves a trace), and no step runs when the
audit log cannot be written.
Secrets: the inventory's secret values and the values of secret vars (a secret-looking name, or `--secret-var`) are
scrubbed by value from everything a run shows or records: the plan, step headers, outcomes, gate texts, the JSON
document and the audit record.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

import msgspec

from pdctl.errors import ExitCode
from pdctl.playbook.gates import Gate, evaluate_gate, parse_gate
from pdctl.playbook.outcome import RunContext, StepOutcome
from pdctl.playbook.run_audit import audit_end as _audit, audit_start as _audit_start
from pdctl.playbook.run_errors import error_exit_code, error_text
from pdctl.playbook.schema import RunHandler
from pdctl.playbook.masking import mask_outcome
from pdctl.playbook.planning import Plan, PlannedStep, plan  # noqa: F401 -- plan: what `pdctl run` calls first
from pdctl.playbook.run_result import RunResult, StepRun
from pdctl.playbook.steps import run_kind
from pdctl.secrets import inventory_secrets

if TYPE_CHECKING:
    from pdctl.ops.context import Deployment


# -- running ----------------------------------------------------------------------------------------------------


@dataclass
class Hooks:
    """How the CLI watches a run. Each is called in the run's thread; defaults do nothing."""

    step_started: Callable[[PlannedStep, Optional[str]], None] = lambda step, handler_of: None
    step_finished: Callable[[StepRun], None] = lambda run: None


def _execute(
    ps: PlannedStep, ctx: RunContext, hooks: Hooks, handler_of: Optional[str], ended: list[StepRun]
) -> StepRun:
    """Run one step and judge its gate. When an exception ends the step (Ctrl-C, a bug), its StepRun is appended to
    `ended` (for the run's record) and the exception goes on."""
    from pdctl.secrets import mask_nested, mask_text

    hooks.step_started(ps, handler_of)
    t0 = time.monotonic()
    try:
        out = run_kind(ps.kind, ctx, ps.args)
    except KeyboardInterrupt as e:
        by = getattr(e, "signal_name", None) or "Ctrl-C"
        partial: Optional[StepOutcome] = getattr(e, "outcome", None)  # StepInterrupted: what the step gathered
        sr = StepRun(
            ps.index,
            ps.spec.name,
            ps.spec.action,
            "interrupted",
            time.monotonic() - t0,
            f"interrupted ({by})",
            130,
            handler_of,
            mask_outcome(partial, ctx.secrets) if partial is not None else None,
            note=f"interrupted ({by})",
            gate_brief=f"interrupted ({by})",
        )
        ended.append(sr)
        raise
    except Exception as e:  # a bug or an unmapped failure ends the run: the record names the step and the error
        err = mask_text(error_text(e), ctx.secrets)
        ended.append(
            StepRun(
                ps.index,
                ps.spec.name,
                ps.spec.action,
                "failed",
                time.monotonic() - t0,
                f"failed: error: {err}",
                error_exit_code(e),
                handler_of,
                note=f"error: {err}",
                gate_brief="error",
            )
        )
        raise
    # on what the step saw (its output already masked, so the gate's secret values are masked alike); then
    # scrubbed for the record
    passed, why = evaluate_gate(parse_gate(mask_nested(msgspec.to_builtins(ps.gate), ctx.secrets)), out)
    shown, why = mask_outcome(out, ctx.secrets), mask_text(why, ctx.secrets)  # a gate's words may quote a secret
    sr = StepRun(
        ps.index,
        ps.spec.name,
        ps.spec.action,
        "passed" if passed else "failed",
        time.monotonic() - t0,
        ("passed: " if passed else "failed: ") + why,
        ExitCode.OK if passed else (shown.exit_code or ExitCode.CHECK_FAILED),
        handler_of,
        shown,
        gate_brief=_brief(ps.gate, shown, passed, why),
    )
    hooks.step_finished(sr)
    return sr


#: a failed step's exit codes that say it could not judge: its handler, which acts, is not run
UNKNOWN_EXITS: dict[int, str] = {ExitCode.UNREACHABLE: "a host or worker did not answer", ExitCode.REFUSED: "refused"}


def run(p: Plan, dep: Deployment, *, hooks: Hooks | None = None, audit_log: Path | None = None) -> RunResult:
    """Execute the plan against an open Deployment. Never raises for a failed step (the result says). Ctrl-C stops
    the run where it is: the result is marked interrupted with exit code 130, no handler or later step runs.
    Appends one audit record; before the first step, a "started" record when a step that will run is mutating.
    Raises UsageError (nothing run) when the audit log cannot be written."""
    from pdctl import audit

    hooks = hooks or Hooks()
    ctx = RunContext(dep, apply=p.apply, secrets=set(p.secrets) | inventory_secrets(dep.inv))
    result = RunResult(p, run_id=uuid.uuid4().hex[:12])
    started = time.time()
    _audit_start(audit, result, started, audit_log, ctx.secrets)
    stopped: str | None = None  # the step whose failure stopped the run (not the first failure, with continue)
    ended: list[StepRun] = []  # the step an exception ended, if one did
    try:
        for ps in p.sequence:
            if not ps.runs:
                sr = StepRun(ps.index, ps.spec.name, ps.spec.action, "skipped", note=ps.skip_reason or "")
                result.steps.append(sr)
                hooks.step_finished(sr)
                continue
            if stopped:
                sr = StepRun(
                    ps.index,
                    ps.spec.name,
                    ps.spec.action,
                    "not run",
                    note=f"not run: the run stopped at step '{stopped}'",
                )
                result.steps.append(sr)
                hooks.step_finished(sr)
                continue
            sr = _execute(ps, ctx, hooks, None, ended)
            result.steps.append(sr)
            _collect(result, sr)
            if sr.status == "passed":
                continue
            policy = ps.spec.on_failure
            if isinstance(policy, RunHandler):
                h = p.handler(policy.run)
                if sr.exit_code in UNKNOWN_EXITS:  # nothing acts on an unknown (3) or a refusal (4)
                    hs = StepRun(
                        h.index,
                        h.spec.name,
                        h.spec.action,
                        "skipped",
                        handler_of=ps.spec.name,
                        note=f"not run: step '{ps.spec.name}' ended with exit {sr.exit_code} "
                        f"({UNKNOWN_EXITS[sr.exit_code]}): nothing acts on what it could not see",
                    )
                    result.steps.append(hs)
                    hooks.step_finished(hs)
                    result.recommendations.append(
                        f"step '{ps.spec.name}' could not judge (exit {sr.exit_code}); handler '{h.spec.name}' "
                        f"({h.describe}) was not run: fix what the step names, then run the playbook again"
                    )
                elif not h.runs:
                    hs = StepRun(
                        h.index,
                        h.spec.name,
                        h.spec.action,
                        "skipped",
                        handler_of=ps.spec.name,
                        note=h.skip_reason or "",
                    )
                    result.steps.append(hs)
                    hooks.step_finished(hs)
                    result.recommendations.append(
                        f"step '{ps.spec.name}' failed; handler '{h.spec.name}' ({h.describe}) was not run "
                        f"because {h.skip_reason}"
                    )
                else:
                    hs = _execute(h, ctx, hooks, ps.spec.name, ended)
                    result.steps.append(hs)
                    _collect(result, hs)
                    if hs.status == "passed":
                        sr.status = "recovered"
                        sr.gate += f" (recovered by handler '{h.spec.name}')"
                        sr.gate_brief += f"; recovered by handler '{h.spec.name}'"
                        continue
            _fail(result, sr)
            if policy != "continue":
                stopped = ps.spec.name
    except KeyboardInterrupt as e:
        result.interrupted = True
        result.interrupted_by = getattr(e, "signal_name", None) or "Ctrl-C"
        result.exit_code = ExitCode.INTERRUPTED
        if ended:
            result.steps.append(ended[-1])
            _collect(result, ended[-1])
            try:
                hooks.step_finished(ended[-1])
            except KeyboardInterrupt:
                pass
    except BaseException as e:  # anything else ends the run too (a bug, a lost pipe): recorded as it ended, not ok
        from pdctl.secrets import mask_text

        result.error = mask_text(error_text(e), ctx.secrets)
        result.exit_code = error_exit_code(e)
        if ended:
            result.steps.append(ended[-1])
            _fail(result, ended[-1])
        raise
    finally:
        _audit(audit, result, started, audit_log, ctx.secrets)
    return result


def _collect(result: RunResult, sr: StepRun) -> None:
    out = sr.outcome
    if out is None:
        return
    if out.health is not None:
        result.health = out.health
        result.health_reports.append(out.health)
    if sr.status == "failed" and out.recommendation:
        result.recommendations.append(f"{sr.name}: {out.recommendation}")
    if sr.status == "failed" and out.data.get("hint"):
        result.recommendations.append(f"{sr.name}: {out.data['hint']}")


def _brief(gate: Gate, out: StepOutcome, passed: bool, why: str) -> str:
    """The gate verdict without the action's summary (shown beside it): "ok" / "not ok" for the default gate,
    "error" when the action raised, else the gate's own words ("verdict pinned (want drained)")."""
    if out.error is not None:
        return "error"
    if not gate.keys:
        return "ok" if passed else "not ok"
    return why


def _fail(result: RunResult, sr: StepRun) -> None:
    if result.failed_step is None:
        result.failed_step = sr.name
        result.exit_code = sr.exit_code or ExitCode.CHECK_FAILED
