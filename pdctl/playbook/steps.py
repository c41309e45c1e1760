"""The registry of step kinds a playbook can use and their argument models (gates: gates.py).

Each kind is a StepKind: an argument model (pydantic, unknown keys refused), the gate keys it understands, whether it
changes the deployment, and `run(ctx, args) -> StepOutcome`. Kinds call the ops library (`pdctl.ops.*`, imported
inside the functions). Nothing here prints.

Ctrl-C: storm, triage and inflight sampling catch KeyboardInterrupt themselves and return a partial report. A step
never turns such a report into an ordinary pass or failure: it raises StepInterrupted (a KeyboardInterrupt carrying
what was gathered), so the runner stops the run without running handlers or later steps.
"""

from __future__ import annotations

import time
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pdctl.errors import PdctlError, UsageError
from pdctl.playbook.gates import check_gate, evaluate_gate
from pdctl.playbook.outcome import ROLE, RunContext, StepKind, StepOutcome, _Args

WAITABLE = ("verify", "inflight", "triage", "shell")   # what `wait: {until: ...}` may poll (no restart/deploy/storm)


def check_args(kind: StepKind, args: dict[str, Any], *, with_values: bool) -> list[tuple[str, str]]:
    """(field, problem) for the args. Without values (load time, `${...}` not yet substituted) only keys are
    checked; with values the whole model is validated."""
    out: list[tuple[str, str]] = []
    model = kind.args
    if model.model_config.get("extra") == "forbid":
        for k in args:
            if k not in model.model_fields:
                out.append((f"args.{k}", f"unknown argument of action {kind.name!r} "
                                         f"(its arguments: {', '.join(model.model_fields) or 'none'})"))
    elif kind.validate is not None:
        out += kind.validate(args, with_values)
        return out
    if out or not with_values:
        if not with_values and kind.name == "wait":
            out += _check_wait_until(args)
        return out
    try:
        model.model_validate(args)
    except ValidationError as err:
        for e in err.errors():
            loc = ".".join(str(p) for p in e["loc"])
            msg = e["msg"].removeprefix("Value error, ")
            out.append((f"args.{loc}" if loc else "args", msg + ("" if e["type"] == "missing" else
                                                               f" (got {e.get('input')!r})")))
    return out


def _check_wait_until(args: dict[str, Any]) -> list[tuple[str, str]]:
    until = args.get("until")
    if not isinstance(until, dict):
        return []
    kind = REGISTRY.get(until.get("action", ""))
    if kind is None or kind.name not in WAITABLE:
        return [("args.until.action", f"expected a check to poll ({', '.join(WAITABLE)}), got {until.get('action')!r}")]
    return [(f"args.until.{f}", m) for f, m in check_args(kind, until.get("args") or {}, with_values=False)] + \
        [(f"args.until.{f}", m) for f, m in check_gate(kind, until.get("gate") or {})]


def inventory_secrets(inv) -> set[str]:
    """The secret values the inventory declares (roles' env and launch flags, final_health.expect), to scrub from
    free text such as an error message carrying a log tail."""
    from pdctl.launch import flag_tokens
    from pdctl.secrets import secret_values

    out: set[str] = set()
    for _role, _i, inst in inv.instances():
        out |= secret_values(inst.env, flag_tokens(inst.args))
    for exp in inv.final_health.expect.values():
        out |= secret_values(exp.env, flag_tokens(exp.flags))
    return out


def _failure(e: PdctlError, secrets: set[str] = frozenset()) -> StepOutcome:
    """A failed outcome from an error; its message and hint are masked (they may hold log tails with secrets)."""
    from pdctl.secrets import mask_text

    message = mask_text(e.message, secrets)
    hint = mask_text(e.hint, secrets) if e.hint else None
    return StepOutcome(False, message.splitlines()[0] if message else "", exit_code=e.exit_code, error=message,
                       data={"hint": hint} if hint else {})


class StepInterrupted(KeyboardInterrupt):
    """Ctrl-C reached a step whose op caught it and returned a partial report. A KeyboardInterrupt, so everything
    that stops on Ctrl-C stops on it; `outcome` is what the step had gathered (for the record)."""

    def __init__(self, outcome: Optional[StepOutcome] = None):
        super().__init__()
        self.outcome = outcome


def _stop_if_interrupted(partial: bool, outcome: StepOutcome) -> StepOutcome:
    if partial:
        raise StepInterrupted(outcome)
    return outcome


def _health_outcome(report, prefix: str = "final-health") -> tuple[bool, dict[str, bool], str]:
    layers = {name: not any(r.failed for r in rs) for name, rs in report.layers.items()}
    fails = report.failures()
    if report.ok:
        return True, layers, f"{prefix}: PASS ({', '.join(layers)})"
    first = "; ".join(f"{r.target} {r.name}: {r.observed or r.detail}" for r in fails[:3])
    return False, layers, f"{prefix}: FAIL in {', '.join(n for n, v in layers.items() if not v)} ({first})"


# -- verify ---------------------------------------------------------------------------------------------------------

class VerifyArgs(_Args):
    layers: Optional[list[Literal["health", "e2e", "transfer", "flags", "lineage", "inflight"]]] = None
    since_baseline: bool = False       # transfer layer: fail only if failures grew since the recorded baseline
    record_baseline: bool = False      # record the current failure counters as the baseline first


def _run_verify(ctx: RunContext, a: VerifyArgs) -> StepOutcome:
    from pdctl.ops import verify

    layers = tuple(a.layers) if a.layers else verify.LAYERS
    report = verify.final_health_with_baseline(ctx.dep, since_baseline=a.since_baseline, record=a.record_baseline,
                                               layers=layers)
    ok, per_layer, summary = _health_outcome(report)
    return StepOutcome(ok, summary, exit_code=0 if ok else 1, layers=per_layer, health=report,
                       data={"final_health": report.to_dict()})


# -- restart / deploy -------------------------------------------------------------------------------------------------

class RestartArgs(_Args):
    pair: bool = True
    roles: Optional[list[ROLE]] = None
    override_hazard: bool = False
    verify: bool = True

    @model_validator(mode="after")
    def _what(self) -> "RestartArgs":
        if self.roles and self.pair:
            raise ValueError("give pair: true or roles: [...], not both (set pair: false with roles)")
        if not self.roles and not self.pair:
            raise ValueError("nothing to restart: pair is false and no roles given")
        return self


def _run_restart(ctx: RunContext, a: RestartArgs) -> StepOutcome:
    from pdctl.ops.restart import PAIR, restart

    roles = PAIR if a.pair else tuple(a.roles or ())
    res = restart(ctx.dep, roles=roles, override_hazard=a.override_hazard, verify=a.verify)
    steps = f"{len(res.steps)} restart steps in {sum(s.seconds for s in res.steps):.1f}s"
    if res.health is None:
        return StepOutcome(True, f"restarted {'/'.join(roles)}: {steps}", data=res.to_dict())
    ok, layers, fh = _health_outcome(res.health)
    return StepOutcome(ok, f"restarted {'/'.join(roles)}: {steps}; {fh}", exit_code=0 if ok else 1, layers=layers,
                       health=res.health, data=res.to_dict())


class DeployArgs(_Args):
    verify: bool = True


def _run_deploy(ctx: RunContext, a: DeployArgs) -> StepOutcome:
    from pdctl.ops.deploy import deploy

    res = deploy(ctx.dep, verify=a.verify)
    what = f"deploy: {res.plan.action} ({res.plan.reason})"
    if res.health is None:
        return StepOutcome(True, what, data=res.to_dict())
    ok, layers, fh = _health_outcome(res.health)
    return StepOutcome(ok, f"{what}; {fh}", exit_code=0 if ok else 1, layers=layers, health=res.health,
                       data=res.to_dict())


# -- storm, triage, inflight -------------------------------------------------------------------------------------------

class StormArgs(BaseModel):
    """The fields of pdctl.ops.storm_plan.StormConfig (requests, prompt_tokens, abort_min_s, abort_max_s,
    sample_every_s, watch_s, target, max_new_tokens, calib_requests, spacing_s, seed, ...) plus `router`; checked
    against StormConfig by _storm_validate."""

    model_config = ConfigDict(extra="allow")


class TriageArgs(_Args):
    window_s: Optional[float] = Field(None, gt=0, le=3600)     # inflight/decode-idle window (default: triage's)
    interval_s: Optional[float] = Field(None, gt=0, le=600)


class InflightArgs(_Args):
    window_s: float = Field(30.0, gt=0, le=3600)
    interval_s: float = Field(3.0, gt=0, le=600)


def _storm_validate(args: dict[str, Any], with_values: bool) -> list[tuple[str, str]]:
    """Check storm args against StormConfig (names always; values once substituted)."""
    import dataclasses

    from pdctl.ops.storm_plan import StormConfig

    names = [f.name for f in dataclasses.fields(StormConfig)] + ["router"]
    bad = [(f"args.{k}", f"unknown argument of action 'storm' (its arguments: {', '.join(names)})")
           for k in args if k not in names]
    if bad or not with_values:
        return bad
    try:
        StormConfig(**{k: v for k, v in args.items() if k != "router"})
    except (ValueError, TypeError) as e:
        return [("args", f"storm: {e}")]
    return []


def _run_storm(ctx: RunContext, a: StormArgs) -> StepOutcome:
    from pdctl.ops.storm import storm
    from pdctl.ops.storm_plan import StormConfig

    kw = dict(a.model_extra or {})
    router = kw.pop("router", None)
    try:
        cfg = StormConfig(**kw)
    except (ValueError, TypeError) as e:
        raise UsageError(f"storm: {e}") from None
    rep = storm(ctx.dep, cfg, router=router)
    v = rep.verdict
    if rep.partial:
        verdict = "interrupted"
    elif rep.ok:
        verdict = "drained"
    else:
        verdict = "pinned" if v is not None and v.pinned else "not-drained"
    hits = getattr(rep, "hits", None)
    hit_txt = ""
    if hits is not None and hasattr(hits, "to_dict"):
        hd = hits.to_dict()
        rate = hd.get("hit_rate") if isinstance(hd, dict) else None
        hit_txt = f"; transfer-window hit rate {rate:.0%}" if isinstance(rate, (int, float)) else ""
    reason = v.reason if v is not None else "no verdict"
    out = StepOutcome(rep.ok, f"storm ({cfg.target}, {cfg.requests} requests): {verdict}: {reason}{hit_txt}",
                      exit_code=rep.exit_code() or 0, verdict=verdict,
                      recommendation=("a room stayed pinned after the storm: collect logs, then "
                                      "`pdctl restart --pair`; compare with the fixed build") if verdict == "pinned"
                      else None, data=rep.to_dict())
    return _stop_if_interrupted(rep.partial, out)


def triage_headline(rep) -> str:
    """The words `pdctl triage` ends with (HEALTHY / ACTION NEEDED / WARNINGS): the report's own headline. The
    step's `verdict` (clean / warn / action, what gates match) is unchanged."""
    return rep.headline


def _run_triage(ctx: RunContext, a: TriageArgs) -> StepOutcome:
    from pdctl.ops.triage import triage

    rep = triage(ctx.dep, **a.model_dump(exclude_none=True))
    acting = [f for f in rep.findings if f.severity == "action"]
    if rep.partial:
        verdict = "interrupted"
    else:
        verdict = "action" if acting else ("warn" if rep.findings else "clean")
    titles = "; ".join(f.title for f in (acting or rep.findings))
    actions = list(dict.fromkeys(f.action for f in acting if f.action))
    ok = verdict in ("clean", "warn")
    head = triage_headline(rep)
    out = StepOutcome(ok, head + (f": {titles}" if titles else ""), exit_code=rep.exit_code() or (0 if ok else 1),
                      verdict=verdict, recommendation="; ".join(actions) or None, data=rep.to_dict())
    return _stop_if_interrupted(rep.partial, out)


def _run_inflight(ctx: RunContext, a: InflightArgs) -> StepOutcome:
    from pdctl.ops.inflight import sample_inflight

    rep = sample_inflight(ctx.dep, a.window_s, a.interval_s)
    code = rep.exit_code()
    why = rep.verdict.summary if rep.verdict is not None else ("; ".join(rep.notes) or "no complete sample")
    out = StepOutcome(code == 0, f"inflight: verdict {rep.name}" + (f"; {why}" if why else ""), exit_code=code,
                      verdict=rep.name, data=rep.to_dict())
    return _stop_if_interrupted(rep.partial, out)


# -- shell ----------------------------------------------------------------------------------------------------------------

class ShellArgs(_Args):
    role: ROLE
    index: int = Field(0, ge=0)
    command: Union[str, list[str]]
    timeout: float = Field(60.0, gt=0, le=3600)
    env: dict[str, str] = Field(default_factory=dict)


def shell_command(a: ShellArgs) -> str:
    """The command line sent to the host: a list is quoted element by element; env names checked, values quoted.
    (`${...}` values inside a string command were quoted when substituted.)"""
    from pdctl.shell import env_assignments, quote_argv

    cmd = quote_argv(a.command) if isinstance(a.command, list) else a.command
    return f"env {env_assignments(a.env)} sh -c {quote_argv([cmd])}" if a.env else cmd


def _run_shell(ctx: RunContext, a: ShellArgs) -> StepOutcome:
    from pdctl.secrets import mask_text, secret_values

    instances = getattr(ctx.dep.inv.roles, a.role)
    if a.index >= len(instances):
        raise UsageError(f"shell: {a.role} has {len(instances)} instance(s), no index {a.index}")
    inst = instances[a.index]
    secrets = secret_values({**inst.env, **a.env}) | ctx.secrets
    res = ctx.dep.transport(inst.host).run(shell_command(a), timeout=a.timeout)
    out, err = mask_text(res.stdout, secrets), mask_text(res.stderr, secrets)
    last = (out.strip().splitlines() or err.strip().splitlines() or [""])[-1][:160]
    if res.timed_out:
        summary = f"timed out after {a.timeout:g}s on {inst.host} (timeout {a.timeout:g}s expired)"
    else:
        summary = f"exit {res.exit_code} on {inst.host}" + (f": {last}" if last else "")
    return StepOutcome(res.ok, summary, exit_code=0 if res.ok else 1,
                       exit_status=None if res.timed_out else res.exit_code, stdout=out, stderr=err,
                       data={"host": inst.host, "timed_out": res.timed_out})


# -- wait -----------------------------------------------------------------------------------------------------------------

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


def _run_wait(ctx: RunContext, a: WaitArgs) -> StepOutcome:
    progress = ctx.dep.progress
    t0 = time.monotonic()
    if a.seconds is not None:
        while (elapsed := time.monotonic() - t0) < a.seconds:
            progress.waiting(f"{a.seconds:g}s to pass", elapsed, a.seconds)
            time.sleep(min(0.5, a.seconds - elapsed))
        return StepOutcome(True, f"waited {a.seconds:g}s")
    spec = a.until
    kind = REGISTRY[spec.action]
    args = kind.args.model_validate(spec.args)
    tries, why = 0, ""
    while True:
        tries += 1
        try:
            out = kind.run(ctx, args)
        except UsageError:
            raise                  # a misuse (e.g. no baseline recorded) does not get better by waiting
        except PdctlError as e:
            out = _failure(e, ctx.secrets)
        passed, why = evaluate_gate(spec.gate, out)
        elapsed = time.monotonic() - t0
        if passed:
            return StepOutcome(True, f"{spec.action} passed after {elapsed:.1f}s ({tries} tries): {why}",
                               verdict=out.verdict, layers=out.layers, health=out.health)
        if elapsed + a.interval > a.timeout:
            return StepOutcome(False, f"{spec.action} did not pass within the wait timeout of {a.timeout:g}s "
                                      f"({tries} tries); last: {why}", exit_code=1, verdict=out.verdict,
                               layers=out.layers, health=out.health, data={"last": out.to_dict()})
        progress.waiting(f"{spec.action} to pass", elapsed, a.timeout, detail=why)
        time.sleep(a.interval)


# -- descriptions for the plan ---------------------------------------------------------------------------------------------

def _describe_args(a: BaseModel) -> str:
    from pdctl.playbook.vars import show_value

    d = a.model_dump(exclude_unset=True)
    d.update(getattr(a, "model_extra", None) or {})
    return " ".join(f"{k}={show_value(v)}" for k, v in d.items())


def _describe_verify(a: VerifyArgs) -> str:
    # one `--layer X` per layer: the form every pdctl version accepts (older ones refuse a comma list)
    return "verify final-health" + ("".join(f" --layer {n}" for n in a.layers) if a.layers else " (all layers)") + \
        (" --record-baseline" if a.record_baseline else "") + (" --since-baseline" if a.since_baseline else "")


def _describe_restart(a: RestartArgs) -> str:
    s = "restart --pair" if a.pair else "restart " + " ".join(f"--role {r}" for r in a.roles or ())
    return s + (" --override-hazard" if a.override_hazard else "") + ("" if a.verify else " --no-verify")


def _describe_shell(a: ShellArgs) -> str:
    from pdctl.secrets import mask_text

    return f"shell on {a.role}[{a.index}]: {mask_text(shell_command(a))}"


def _describe_wait(a: WaitArgs) -> str:
    if a.seconds is not None:
        return f"wait {a.seconds:g}s"
    return f"wait until {a.until.action} passes (every {a.interval:g}s, at most {a.timeout:g}s)"


REGISTRY: dict[str, StepKind] = {k.name: k for k in (
    StepKind("verify", VerifyArgs, ("ok", "layers_pass"), False, _run_verify, _describe_verify,
             "final-health, all layers or the ones named"),
    StepKind("restart", RestartArgs, ("ok", "layers_pass"), True, _run_restart, _describe_restart,
             "the ordered co-restart (pair), then final-health"),
    StepKind("deploy", DeployArgs, ("ok", "layers_pass"), True, _run_deploy,
             lambda a: "deploy" + ("" if a.verify else " --no-verify"), "render, install, co-start, final-health"),
    StepKind("storm", StormArgs, ("ok", "verdict"), True, _run_storm,
             lambda a: ("storm " + _describe_args(a)).strip(), "abort storm with a drain verdict",
             _storm_validate),
    StepKind("triage", TriageArgs, ("ok", "verdict"), False, _run_triage,
             lambda a: ("triage " + _describe_args(a)).strip(), "the stall decision path"),
    StepKind("inflight", InflightArgs, ("ok", "verdict"), False, _run_inflight,
             lambda a: f"verify inflight --window {a.window_s:g} --interval {a.interval_s:g}",
             "drained / busy / pinned"),
    StepKind("wait", WaitArgs, ("ok",), False, _run_wait, _describe_wait,
             "a fixed duration, or until a read-only check passes (bounded)"),
    StepKind("shell", ShellArgs, ("ok", "exit_code", "stdout_contains"), True, _run_shell, _describe_shell,
             "a command on a role's host, output captured"),
)}


def run_kind(kind: StepKind, ctx: RunContext, args: BaseModel) -> StepOutcome:
    """Run one step's action. A PdctlError becomes a failed outcome carrying its exit code (message masked); nothing
    else is caught: KeyboardInterrupt (and StepInterrupted, a partial report after Ctrl-C) reaches the runner."""
    try:
        return kind.run(ctx, args)
    except PdctlError as e:
        return _failure(e, ctx.secrets)
