"""`action: shell`: a command on a role's host, output captured (secrets masked)."""

from __future__ import annotations

from typing import Annotated, Union

import msgspec
from msgspec import Meta

from pdctl.errors import ExitCode, UsageError
from pdctl.playbook.kinds import register
from pdctl.playbook.outcome import ROLE, ArgProblems, Args, RawArgs, RunContext, StepOutcome
from pdctl.playbook.vars import Scope


class ShellArgs(Args):
    role: ROLE
    command: Union[str, list[str]]
    index: Annotated[int, Meta(ge=0)] = 0
    timeout: Annotated[float, Meta(gt=0, le=3600)] = 60.0
    env: dict[str, str] = msgspec.field(default_factory=dict)


def fill(raw: RawArgs, scope: Scope) -> RawArgs:
    """The args with their `${...}` filled in. A string `command` is shell text: each `${...}` in it becomes a
    reference to an environment variable bound in `env` (`shell_refs`), so its value is data in any quotes. An argv
    list's elements and `env`'s values are substituted as they are: each is quoted whole when the command is built.
    Raises VarError."""
    from pdctl.playbook.shell_refs import bind_refs
    from pdctl.playbook.vars import as_text, lookup, substitute

    out = {k: v if k == "command" and isinstance(v, str) else substitute(v, scope) for k, v in raw.items()}
    command = raw.get("command")
    if isinstance(command, str):
        env = out.get("env", {})
        taken = set(env) if isinstance(env, dict) else set()
        out["command"], bound = bind_refs(command, lambda name: as_text(lookup(name, scope)), taken)
        if bound and isinstance(env, dict):  # an `env` of another type is refused when the args are converted
            out["env"] = {**env, **bound}
    return out


def check(raw: RawArgs, with_values: bool) -> ArgProblems:
    """At load time: a `${...}` of a string `command` standing where its value cannot be passed as data."""
    from pdctl.playbook.shell_refs import refused_refs

    command = raw.get("command")
    if with_values or not isinstance(command, str):
        return []  # once filled in, the command holds only the references written for it
    return [("args.command", p) for p in refused_refs(command)]


def shell_command(a: ShellArgs) -> str:
    """The command line sent to the host: a list is quoted element by element; env names checked, values quoted.
    (`${...}` inside a string command were made references to variables of `env` when filled in.)"""
    from pdctl.shell import env_assignments, quote_argv

    cmd = quote_argv(a.command) if isinstance(a.command, list) else a.command
    return f"env {env_assignments(a.env)} sh -c {quote_argv([cmd])}" if a.env else cmd


def describe(a: ShellArgs) -> str:
    from pdctl.secrets import mask_text

    return f"shell on {a.role}[{a.index}]: {mask_text(shell_command(a))}"


@register(
    "shell",
    args=ShellArgs,
    gate_keys=("ok", "exit_code", "stdout_contains"),
    mutating=True,
    describe=describe,
    fill=fill,
    check=check,
    summary="a command on a role's host, output captured",
    order=80,
)
def run(ctx: RunContext, a: ShellArgs) -> StepOutcome:
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
    return StepOutcome(
        res.ok,
        summary,
        exit_code=ExitCode.OK if res.ok else ExitCode.CHECK_FAILED,
        exit_status=None if res.timed_out else res.exit_code,
        stdout=out,
        stderr=err,
        data={"host": inst.host, "timed_out": res.timed_out},
    )
