"""`action: storm`: the abort storm, with a drain verdict (drained / not-drained / pinned / interrupted)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from pdctl.errors import ExitCode
from pdctl.ops.storm_plan import StormConfig
from pdctl.playbook.kinds import register
from pdctl.playbook.outcome import ArgProblems, Data, RawArgs, RunContext, StepOutcome
from pdctl.playbook.steps import changed_args, stop_if_interrupted
from pdctl.playbook.vars import show_value
from pdctl.serialize import to_data


@dataclass
class StormArgs(StormConfig):
    """`pdctl storm`'s StormConfig (requests, prompt_tokens, abort_min_s, abort_max_s, sample_every_s, watch_s,
    target, max_new_tokens, calib_requests, spacing_s, seed, ...) plus the router to storm through (default: the
    inventory's first). Its own checks run as it is built; `check` says them in the step's arg names first."""

    router: Optional[str] = None

    def config(self) -> StormConfig:
        """The storm's parameters without the router."""
        return StormConfig(**{f.name: getattr(self, f.name) for f in dataclasses.fields(StormConfig)})


def check(args: RawArgs, with_values: bool) -> ArgProblems:
    """Storm args' values (once substituted) against StormConfig, in the step's arg names (its own words are
    `pdctl storm`'s options)."""
    if not with_values:
        return []
    bad: ArgProblems = []
    router = args.get("router")
    if router is not None:  # its form here; whether it is the inventory's router, when the step runs
        from pdctl.checks.router_address import parse_router_address

        try:
            parse_router_address(str(router))
        except ValueError as e:
            bad.append(("args.router", f"{router!r}: {e}"))
    bad += _type_problems(args, {f.name: str(f.type) for f in dataclasses.fields(StormConfig)})
    if bad:
        return bad
    try:
        StormConfig(**{k: v for k, v in args.items() if k != "router"})  # type: ignore[arg-type]  # checked above
    except (ValueError, TypeError) as e:
        bad.append(_in_arg_names(str(e)))
    return bad


#: StormConfig words its errors for `pdctl storm`'s options; a playbook step sets its args
_OPTION_ARGS = {
    "--requests": "requests",
    "--prompt-tokens": "prompt_tokens",
    "--abort-min": "abort_min_s",
    "--abort-max": "abort_max_s",
    "--sample-every (--interval)": "sample_every_s",
    "--watch (--window)": "watch_s",
    "--aim-from/--aim-to (aim fractions)": "aim_lo_frac/aim_hi_frac",
    "--max-new-tokens": "max_new_tokens",
    "--calibrate": "calib_requests",
    "--spacing": "spacing_s",
    "--target": "target",
}


def _in_arg_names(message: str) -> tuple[str, str]:
    """(field, message) with `pdctl storm`'s option names turned into the step's arg names; the field is the one
    arg the message names first ("args" when it names none)."""
    named = sorted((message.find(opt), arg) for opt, arg in _OPTION_ARGS.items() if opt in message)
    for opt in sorted(_OPTION_ARGS, key=len, reverse=True):  # the longest first: none is cut by a shorter one
        message = message.replace(opt, _OPTION_ARGS[opt])
    return (f"args.{named[0][1].split('/')[0]}" if named else "args"), message


_KIND_WORDS = {"int": "a whole number", "float": "a number", "str": "a string"}


def _type_problems(args: dict[str, Data], annotations: dict[str, str]) -> ArgProblems:
    """Each value against its StormConfig annotation ("int", "float | None", ...), so that a `--var x=abc` is
    named as a field with the wrong kind of value instead of surfacing as a comparison error."""
    bad = []
    for k, v in args.items():
        ann = annotations.get(k)
        if ann is None or (v is None and "None" in ann):
            continue
        kind = ann.split("|")[0].strip()
        fits = {
            "int": isinstance(v, int) and not isinstance(v, bool),
            "float": isinstance(v, (int, float)) and not isinstance(v, bool),
            "str": isinstance(v, str),
        }.get(kind, True)
        if not fits:
            shown = repr(v) if isinstance(v, str) else show_value(v)  # true, not True; 'abc' quoted
            bad.append((f"args.{k}", f"{shown} is not {_KIND_WORDS[kind]}"))
    return bad


#: what the plan always shows of a storm: its size and aim (the rest when not at their defaults)
_SHOWN = ("requests", "prompt_tokens", "target", "sample_every_s", "watch_s")


def describe(a: StormArgs) -> str:
    shown = {k: getattr(a, k) for k in _SHOWN} | changed_args(a)
    return "storm " + " ".join(f"{k}={show_value(v)}" for k, v in shown.items() if v is not None)


#: the verdicts a gate can match ("interrupted" stops the run before any gate is judged)
VERDICTS = ("drained", "not-drained", "pinned")


@register(
    "storm",
    args=StormArgs,
    gate_keys=("ok", "verdict"),
    mutating=True,
    describe=describe,
    check=check,
    summary="abort storm with a drain verdict",
    order=40,
    verdicts=VERDICTS,
)
def run(ctx: RunContext, a: StormArgs) -> StepOutcome:
    from pdctl.ops.storm import storm

    cfg = a.config()
    rep = storm(ctx.dep, cfg, router=a.router)
    v = rep.verdict
    if rep.partial:
        verdict = "interrupted"
    elif rep.ok:
        verdict = "drained"
    else:
        verdict = "pinned" if v is not None and v.pinned else "not-drained"
    hits = getattr(rep, "hits", None)
    hit_txt = ""
    rate = getattr(hits, "hit_rate", None)
    if isinstance(rate, (int, float)):
        hit_txt = f"; transfer-window hit rate {rate:.0%}"
    reason = v.reason if v is not None else "no verdict"
    weak = rep.weak_reason  # a pass that does not show the race was exercised: said, not buried in the data
    weak_txt = f"; WEAK pass: {weak}" if weak else ""
    out = StepOutcome(
        rep.ok,
        f"storm ({cfg.target}, {cfg.requests} requests): {verdict}: {reason}{hit_txt}{weak_txt}",
        exit_code=rep.exit_code() or ExitCode.OK,
        verdict=verdict,
        recommendation=(
            "a room stayed pinned after the storm: collect logs, then "
            "`pdctl restart --pair`; compare with the fixed build"
        )
        if verdict == "pinned"
        else None,
        data=to_data(rep),
    )
    return stop_if_interrupted(rep.partial, out, rep.interrupted_by)
