"""Run a playbook: plan (substitute vars, validate args, evaluate `when`), then execute the steps in order.

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

import copy
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

import msgspec

from pdctl.checks.layers import in_order
from pdctl.errors import ExitCode, PlaybookError
from pdctl.playbook.gates import Gate, check_gate, evaluate_gate, parse_gate
from pdctl.playbook.kinds import REGISTRY
from pdctl.playbook.outcome import Data, RawArgs, RunContext, StepKind, StepOutcome
from pdctl.playbook.run_audit import audit_end as _audit, audit_start as _audit_start
from pdctl.playbook.run_errors import error_exit_code, error_text
from pdctl.playbook.schema import Playbook, RunHandler, StepSpec, where
from pdctl.playbook.masking import mask_outcome, mask_shown, run_secrets, secret_var_names
from pdctl.playbook.steps import check_args, run_kind
from pdctl.playbook.vars import VarError, build_scope, set_by, substitute, truthy, unknown_cli_vars
from pdctl.secrets import inventory_secrets
from pdctl.serialize import JSON_OFF, json_key

if TYPE_CHECKING:
    from pdctl.checks.result import CheckResult
    from pdctl.inventory import Inventory
    from pdctl.ops.context import Deployment
    from pdctl.ops.verify import HealthReport


@dataclass
class PlannedStep:
    """As JSON data (the plan's view of the step): the spec's fields flattened, the command line, masked args."""

    index: int  # 1-based position in the file
    spec: StepSpec = field(metadata=JSON_OFF)
    kind: StepKind = field(metadata=JSON_OFF)
    args: Any = field(metadata=JSON_OFF)  # the typed args of its kind (`kind.args`)
    shown_args: RawArgs = field(metadata=json_key("args"))  # substituted, secrets masked: what the plan shows
    runs: bool  # `when` is true (or absent)
    skip_reason: Optional[str] = None
    secrets: frozenset[str] = field(default=frozenset(), repr=False, metadata=JSON_OFF)  # the run's, scrubbed
    gate: Gate = field(default_factory=Gate, metadata=JSON_OFF)  # the spec's gate, `${...}` substituted
    json_extra = (
        ("name", "spec.name"),
        ("action", "spec.action"),
        ("command", "describe"),
        ("gate", "shown_gate"),
        ("on_failure", "spec.on_failure_text"),
        ("when", "spec.when"),
        ("handler", "spec.handler"),
        ("mutating", "kind.mutating"),
    )
    json_mask = "secrets"

    @property
    def describe(self) -> str:
        from pdctl.secrets import mask_text

        return mask_text(self.kind.describe(self.args), self.secrets)

    @property
    def shown_gate(self) -> Data:
        from pdctl.secrets import mask_nested

        return mask_nested(msgspec.to_builtins(self.gate), self.secrets) or "action ok"


@dataclass
class Plan:
    """As JSON data, the `--dry-run --json` document: the playbook's name, description and source flattened in
    (secrets scrubbed)."""

    playbook: Playbook = field(metadata=JSON_OFF)
    inventory: str
    vars: dict[str, Data]
    apply: bool
    steps: list[PlannedStep]  # in file order, handlers included
    inventory_name: str = field(default="", metadata=JSON_OFF)  # the inventory's `name` (history -i matches it)
    secrets: frozenset[str] = field(default=frozenset(), repr=False, metadata=JSON_OFF)  # inventory + secret vars
    json_extra = (("playbook", "playbook.name"), ("description", "playbook.description"), ("source", "playbook.source"))
    json_mask = "secrets"

    @property
    def sequence(self) -> list[PlannedStep]:
        return [s for s in self.steps if not s.spec.handler]

    def handler(self, name: str) -> PlannedStep:
        return next(s for s in self.steps if s.spec.name == name)


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


# -- planning ---------------------------------------------------------------------------------------------------------


def plan(
    pb: Playbook,
    inv: Inventory,
    *,
    cli_vars: Mapping[str, Data] | None = None,
    apply: bool = False,
    secret_vars: set[str] | frozenset[str] = frozenset(),
) -> Plan:
    """Substitute vars into every step, validate the args, evaluate `when`. Changes nothing, connects nowhere.
    `secret_vars` names vars to treat as secret whatever their names (--secret-var). Raises PlaybookError naming
    the step and field for an unknown var or a bad argument value."""
    import json

    from pdctl.secrets import MASK, mask_text
    from pdctl.shell import quote

    texts = [json.dumps(msgspec.to_builtins(s), default=str) for s in pb.steps]
    unknown = unknown_cli_vars(cli_vars or {}, pb.vars, texts)
    if unknown:
        known = ", ".join(sorted(pb.vars)) or "none"
        raise PlaybookError(
            f"{pb.source}: --var {', '.join(unknown)}: not a variable of this playbook (its vars: {known})"
        )
    try:
        scope = build_scope(inv, pb.vars, cli_vars or {}, apply)
    except VarError as e:
        raise PlaybookError(f"{pb.source}: field 'vars': {e}") from None
    names = secret_var_names(scope.vars, secret_vars)
    secrets = run_secrets(inv, scope.vars, names)
    planned, problems = [], []
    for i, s in enumerate(pb.steps, 1):
        kind = REGISTRY[s.action]
        try:
            # a `${...}` inside a shell string is quoted as it is substituted (a list is quoted when run)
            args: RawArgs = {
                k: substitute(v, scope, quote=quote if k in kind.quoted_args and isinstance(v, str) else None)
                for k, v in s.args.items()
            }
        except VarError as e:
            problems.append(f"  {where(i, s.name, 'args')}: {e}")
            continue
        try:  # a gate is compared with what the step saw: its `${...}` filled in as the args' are
            raw_gate: RawArgs = {k: substitute(v, scope) for k, v in s.gate.items()}
        except VarError as e:
            problems.append(f"  {where(i, s.name, 'gate')}: {e}")
            continue
        bad = check_gate(kind, raw_gate)  # a `${...}` may fill in a value of the wrong kind
        if bad:
            problems += [f"  {where(i, s.name, f)}: {mask_text(m, secrets)}{set_by(s.gate, f)}" for f, m in bad]
            continue
        runs, skip = True, None
        if s.when:
            try:
                runs = truthy(s.when, scope)
            except VarError as e:
                problems.append(f"  {where(i, s.name, 'when')}: {e}")
                continue
            if not runs:
                skip = f"when: {s.when} is false" + (" (pass --apply to run it)" if "apply" in s.when else "")
        bad = check_args(kind, args, with_values=True, secrets=secrets)
        if bad:
            problems += [f"  {where(i, s.name, f)}: {m}{set_by(s.args, f)}" for f, m in bad]
            continue
        planned.append(
            PlannedStep(
                i,
                s,
                kind,
                kind.convert(args),
                {k: mask_shown(v, secrets, k) for k, v in args.items()},
                runs,
                skip,
                secrets=secrets,
                gate=parse_gate(raw_gate),
            )
        )
    if problems:
        raise PlaybookError("\n".join([f"{pb.source}: invalid playbook"] + problems))
    shown_vars = {k: (MASK if k in names and v not in (None, "") else v) for k, v in scope.vars.items()}
    return Plan(pb, inv.source, shown_vars, apply, planned, inventory_name=inv.name, secrets=secrets)


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
