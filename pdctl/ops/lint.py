"""`pdctl lint` and the lint gate of deploy and restart: ask each role's host, with the interpreter the role runs
under and in its working directory, whether the installed SGLang / bundled engine / sglang-router accepts the
role's command line and env (pdctl/probes/lint_probe.py, one run per host); the judging is pdctl.checks.lint*.

pdctl never imports sglang: the probe's text is sent as `python -c` and answers one JSON line.
"""

from __future__ import annotations

import json
import time
from typing import Mapping

from pdctl import launch
from pdctl.checks.lint import parse_probe_reply
from pdctl.checks.lint_report import LintReport, RoleAnswer, judge_lint
from pdctl.errors import LintRefused, StepFailed
from pdctl.ops.context import Deployment
from pdctl.ops.fanout import fan_out, raise_first_unreachable
from pdctl.services.base import ServiceSpec
from pdctl.shell import quote, python_oneliner
from pdctl.transport.base import no_answer
from pdctl.role_ref import RoleRef


def module_kinds() -> dict[str, str]:
    """launched module -> the kind of parser that answers for it (an engine, or a router kind's name)."""
    from pdctl.engines import engine_kinds
    from pdctl.routers import router_kinds

    return {
        **{k.module: k.name for k in engine_kinds().values()},
        **{k.module: k.name for k in router_kinds().values()},
    }


def _answer(dep: Deployment, role: str, index: int, spec: ServiceSpec) -> RoleAnswer:
    """A RoleAnswer still to be filled in by the probe: which parser to ask, with which flags."""
    inst = dep.instance(role, index)
    argv = list(spec.argv)
    module = argv[2] if len(argv) >= 3 and argv[1] == "-m" else ""
    kinds = module_kinds()
    kind = kinds.get(module, "")
    problem = (
        "" if kind else (f"not a command pdctl renders (`PYTHON -m {' | '.join(kinds)} ...`): {' '.join(argv[:3])}")
    )
    return RoleAnswer(
        label=dep.inv.label(role, index),
        role=role,
        kind=kind or "unknown",
        host=inst.host,
        python=argv[0] if argv else "",
        flags=argv[3:],
        env=dict(spec.env),
        item=None,
        shape_problem=problem,
    )


def rendered_specs(dep: Deployment, role: str | None = None) -> dict[RoleRef, ServiceSpec]:
    """What deploy would write for every role (or those `role` names), with the interpreter deploy would use
    (read from the installed specs, as deploy does)."""
    from pdctl.ops.render_plan import _select

    installed: dict[RoleRef, ServiceSpec | None] = {}
    for r, i, inst in dep.inv.instances():
        try:
            installed[RoleRef(r, i)] = dep.services(inst.host).installed_spec(dep.inv.service_name(r, i))
        except StepFailed:
            installed[RoleRef(r, i)] = None
    pythons = launch.resolved_pythons(dep.inv, installed)
    return {
        RoleRef(r, i): launch.service_spec(dep.inv, r, i, python=pythons[RoleRef(r, i)][0])
        for r, i in _select(dep.inv, role)
    }


def installed_specs(dep: Deployment, roles: tuple[str, ...]) -> dict[RoleRef, ServiceSpec]:
    """What a restart would start: each role's installed spec (the rendered one where none can be read)."""
    out = {}
    rendered = None
    for r, i, inst in dep.inv.instances():
        if r not in roles:
            continue
        try:
            spec = dep.services(inst.host).installed_spec(dep.inv.service_name(r, i))
        except StepFailed:
            spec = None
        if spec is None:
            rendered = rendered if rendered is not None else rendered_specs(dep)
            spec = rendered[RoleRef(r, i)]
        out[RoleRef(r, i)] = spec
    return out


def _parse_env(env: Mapping[str, str]) -> dict[str, str]:
    """The env the probe parses under: SGLang's own names only, and never a secret-looking one (the request is a
    command-line argument, readable in the host's process list while the probe runs). Values are judged here."""
    from pdctl.secrets import is_secret_name

    return {k: v for k, v in env.items() if k.startswith(("SGLANG_", "SGL_")) and not is_secret_name(k)}


def _ask_host(dep: Deployment, host: str, answers: list[RoleAnswer], workdir: str | None) -> None:
    """Run the probe once on `host` for its roles (grouped by interpreter) and fill their items in. A probe that
    overruns the host's command_timeout raises `no_answer` (UnreachableError, exit 3)."""
    from pdctl.probes import source

    code = source("lint_probe")
    by_python: dict[str, list[RoleAnswer]] = {}
    for a in answers:
        if not a.shape_problem:
            by_python.setdefault(a.python, []).append(a)
    timeout = dep.inv.hosts[host].command_timeout
    for python, group in by_python.items():
        request = {
            "items": [
                {"key": a.label, "kind": a.kind, "argv": a.flags, "env": _parse_env(a.env), "env_names": sorted(a.env)}
                for a in group
            ],
            "site_env": sorted(dep.inv.lint.site_env),
        }
        cmd = python_oneliner(python, code, json.dumps(request))
        if workdir:
            cmd = f"cd {quote(workdir)} && {cmd}"
        res = dep.transport(host).run(cmd, timeout=timeout)
        if res.timed_out:  # a hung interpreter or host: unknown, never a verdict either way
            raise no_answer(host, timeout, f"lint probe with {python}")
        reply = parse_probe_reply(res.stdout)
        if reply is None:
            tail = (res.stderr.strip().splitlines() or [f"exit {res.exit_code}"])[-1][:300]
            why = f"{python} gave no answer ({tail})"
            for a in group:
                a.item = {"available": False, "unavailable": why}
            continue
        items = {it.get("key"): it for it in reply.get("items", [])}
        for a in group:
            a.item = items.get(a.label) or {"available": False, "unavailable": "missing from the probe's answer"}
            a.registry = (reply.get("registries") or {}).get(a.kind)


def lint_specs(dep: Deployment, specs: Mapping[RoleRef, ServiceSpec]) -> LintReport:
    """Ask every host about its roles' `specs` (in parallel, one probe run per host and interpreter) and judge.
    Raises UnreachableError (exit 3) for a host that does not answer: unknown, not a verdict."""
    answers = [_answer(dep, r, i, spec) for (r, i), spec in specs.items()]
    hosts = list(dict.fromkeys(a.host for a in answers))
    t0 = time.monotonic()
    with dep.progress.step(f"lint: ask {len(hosts)} host(s)"):
        raise_first_unreachable(
            fan_out(
                [(h, h) for h in hosts],
                lambda h: _ask_host(dep, h, [a for a in answers if a.host == h], dep.inv.hosts[h].workdir),
            )
        )
    lint = dep.inv.lint
    windows = {dep.inv.label("router", i): r.ready_timeout for i, r in enumerate(dep.inv.roles.router)}
    report = judge_lint(
        answers,
        site_env=lint.site_env,
        probe_timeout=dep.inv.final_health.probe.timeout,
        silenced=[(s.rule, s.role, s.reason) for s in lint.silence],
        restart_windows=windows,
    )
    report.seconds = round(time.monotonic() - t0, 3)
    return report


def lint(dep: Deployment, role: str | None = None) -> LintReport:
    """`pdctl lint`: the command lines and env deploy would render, checked on their hosts. Changes nothing."""
    return lint_specs(dep, rendered_specs(dep, role))


def gate(dep: Deployment, specs: Mapping[RoleRef, ServiceSpec], *, skip: bool, action: str) -> LintReport:
    """Before deploy/restart stops anything: refuse (LintRefused, exit 2) when a role's command line would not
    parse on its host. `skip` (--skip-lint) asks nothing; the caller audits that it was skipped."""
    if skip:
        return LintReport([], skipped=True)
    report = lint_specs(dep, specs)
    blocking = report.blocking
    if blocking:
        lines = [
            f"{action} refused: nothing was stopped; {len(blocking)} command-line problem(s) the host's own "
            "parser reports:"
        ]
        lines += [f"  {f.role}: {f.message}" + (f" -> {f.fix}" if f.fix else "") for f in blocking]
        raise LintRefused(
            "\n".join(lines),
            hint="fix the inventory (`pdctl lint` shows every finding), or pass --skip-lint to override (audited)",
        )
    return report
