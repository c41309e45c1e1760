"""The one safe order: (re)start prefill -> decode -> router, each gated on readiness; stop in reverse.

Shared by deploy and restart. A failed step stops the sequence; the StepFailed raised says which step failed and
what state every role is in at that moment, so the operator knows exactly where things stand.
"""

from __future__ import annotations

import time
from functools import partial
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from pdctl.errors import PdctlError, StepFailed, UnreachableError, as_interrupted
from pdctl.ops.context import Deployment
from pdctl.ops.readiness import wait_ready


@dataclass
class StepRecord:
    step: str
    seconds: float
    ok: bool
    detail: str = ""


def role_states(dep: Deployment) -> dict[str, str]:
    """label -> 'running (pid N, up Xs)' / 'stopped' / 'unknown: why', observed now."""
    out = {}
    for role, i, _ in dep.inv.instances():
        label = dep.inv.label(role, i)
        try:
            st = dep.status(role, i)
        except PdctlError as e:
            out[label] = f"unknown: {e.message.splitlines()[0]}"
            continue
        if st.active:
            up = f", up {time.time() - st.started_at:.0f}s" if st.started_at else ""
            out[label] = f"running (pid {st.main_pid}{up})"
        else:
            out[label] = f"stopped{f' ({st.detail})' if st.detail else ''}"
    return out


class StatesAtInterrupt:
    """`role_states(dep)` as the audit record of an interrupt reads them (pass it as `audited(states=...)`);
    inside `carried()`, an interrupt leaving the block carries the last states read as `role_states`, so the
    screen can show what the record says without asking every host again."""

    def __init__(self, dep: Deployment):
        self.dep = dep
        self.seen: dict[str, str] | None = None

    def __call__(self) -> dict[str, str]:
        self.seen = role_states(self.dep)
        return self.seen

    @contextmanager
    def carried(self) -> Iterator[None]:
        try:
            yield
        except KeyboardInterrupt as e:
            if self.seen is None:
                raise
            stopped = as_interrupted(e)
            stopped.role_states = self.seen
            if stopped is e:
                raise
            raise stopped from None


def _fail(dep: Deployment, step: str, err: Exception, done: list[StepRecord]) -> StepFailed:
    states = role_states(dep)
    lines = [f"stopped at step '{step}': {getattr(err, 'message', str(err))}"]
    if done:
        lines.append("steps completed: " + ", ".join(s.step for s in done if s.ok))
    lines.append("state of each role now:")
    lines += [f"  {label}: {s}" for label, s in states.items()]
    if isinstance(err, UnreachableError):  # a step that got no answer is unknown (exit 3), not a failure seen
        failed = StepFailed("\n".join(lines), hint=err.hint)
        failed.exit_code = err.exit_code
    else:
        failed = StepFailed("\n".join(lines), hint="fix the cause, then run `pdctl restart --pair` to restart in order")
    failed.steps = done  # type: ignore[attr-defined]
    return failed


def ordered_restart(
    dep: Deployment, roles: tuple[str, ...] = ("prefill", "decode", "router"), *, grace: float = 20.0
) -> list[StepRecord]:
    """Restart every instance of `roles`, in the safe order, each waited on until ready. When prefills and decodes
    both restart, the decodes are stopped first and started after the prefills: a prefill restarted while a router
    still sends it traffic would otherwise pair with the old decode processes, which then come back under it (the
    degraded-bootstrap hazard, inside a co-restart; tests/e2e/test_xpyd_netns.py saw it under load)."""
    done: list[StepRecord] = []
    chosen = [(role, i, inst) for role, i, inst in dep.inv.instances() if role in roles]
    _check_installed(dep, chosen)
    held = [(role, i, inst) for role, i, inst in chosen if role == "decode"] if "prefill" in roles else []
    # a (re)start and a readiness wait per instance, a stop per held decode, and without a router restart a wait for
    # the routers to take each one back
    total = 2 * len(chosen) + len(held) + (len(chosen) if "router" not in roles else 0)
    for role, i, inst in reversed(held):
        name = dep.inv.service_name(role, i)
        run_step(
            dep,
            f"stop {dep.inv.label(role, i)} (until the prefills are back)",
            lambda inst=inst, name=name: dep.services(inst.host).stop(name, grace=grace),
            done,
            total=total,
        )
    for role, i, _inst in chosen:
        restart_one(dep, role, i, done, total=total, grace=grace, start_only=bool(held) and role == "decode")
    if "router" not in roles:  # no fresh router will list them: wait until the running ones route to them again
        for role, i, _inst in chosen:
            run_step(
                dep,
                f"wait the routers to route to {dep.inv.label(role, i)} again",
                lambda role=role, i=i: readmitted(dep, role, i),
                done,
                total=total,
            )
    return done


def readmitted(dep: Deployment, role: str, i: int) -> None:
    """Block until every running router lists worker (role, i) as serving again: a router keeps a restarted worker
    out until its own health checks pass again (smg lists it `failed` meanwhile, and answers 503 "no available
    workers" when it was the only one), so a worker's /health alone does not mean it takes traffic. A router that
    is not running is not waited for. Raises StepFailed after the router's ready_timeout."""
    from pdctl.checks.rolling import back_in_service
    from pdctl.ops.router_workers import url_of, workers
    from pdctl.poll import poll_until

    for r, router in enumerate(dep.inv.roles.router):
        if not dep.status("router", r).active:
            continue
        url = url_of(dep, r, role, i)
        w = poll_until(
            partial(workers, dep, r),
            lambda ws: back_in_service(ws, url, role),
            timeout=router.ready_timeout,
            interval=0.25,
            backoff=1.5,
            max_interval=2.0,
            timeout_name=f"{dep.inv.label('router', r)}'s ready_timeout",
        )
        if not w.ok:
            raise StepFailed(
                f"{dep.inv.label('router', r)} does not route to {dep.inv.label(role, i)} after "
                f"{router.ready_timeout:g}s although it answers /health (GET /workers read until then)"
            )


def restart_one(
    dep: Deployment,
    role: str,
    i: int,
    done: list[StepRecord],
    *,
    total: int = 0,
    grace: float = 20.0,
    prefix: str = "",
    start_only: bool = False,
) -> None:
    """Restart one instance (`start_only`: start it, it was stopped) and wait until it is ready: two steps (named
    after `prefix`) appended to `done`. Raises StepFailed naming the step and every role's state."""
    inst = dep.instance(role, i)
    label = dep.inv.label(role, i)
    name = dep.inv.service_name(role, i)
    svc = dep.services(inst.host)
    first = (
        (f"{prefix}start {label}", lambda: svc.start(name))
        if start_only
        else (f"{prefix}restart {label}", lambda: svc.restart(name, grace=grace))
    )
    for what, action in (first, (f"{prefix}wait {label} ready", lambda: wait_ready(dep, role, i))):
        run_step(dep, what, action, done, total=total)


def run_step(dep: Deployment, what: str, action, done: list[StepRecord], *, total: int = 0) -> None:
    """One named, timed step shown on the progress line; appended to `done` when it succeeds. A PdctlError
    becomes StepFailed naming the step, the steps completed and every role's state."""
    t0 = time.monotonic()
    try:
        with dep.progress.step(what, index=len(done), total=max(total, len(done) + 1)):
            action()
    except PdctlError as e:
        raise _fail(dep, what, e, done) from None
    done.append(StepRecord(what, time.monotonic() - t0, True))


def _check_installed(dep: Deployment, chosen) -> None:
    """Refuse before the first stop when a role to restart has no installed definition: stopping the others and
    then failing to start it would leave the pair down. Raises StepFailed (exit 1)."""
    missing = []
    for role, i, inst in chosen:
        why = dep.services(inst.host).not_installed(dep.inv.service_name(role, i))
        if why:
            missing.append(f"{dep.inv.label(role, i)} is not installed ({why})")
    if missing:
        raise StepFailed(
            "nothing was stopped: " + "; ".join(missing),
            hint="run `pdctl deploy`: it installs every role and starts the pair in order",
        )


def ordered_stop(dep: Deployment, *, grace: float = 20.0) -> list[StepRecord]:
    """Stop router -> decode -> prefill (the reverse of the start order)."""
    done: list[StepRecord] = []
    chosen = list(reversed(dep.inv.instances()))
    for role, i, inst in chosen:
        what = f"stop {dep.inv.label(role, i)}"
        t0 = time.monotonic()
        try:
            with dep.progress.step(what, index=len(done), total=len(chosen)):
                dep.services(inst.host).stop(dep.inv.service_name(role, i), grace=grace)
        except PdctlError as e:
            raise _fail(dep, what, e, done) from None
        done.append(StepRecord(what, time.monotonic() - t0, True))
    return done
