"""`pdctl restart --rolling`: the co-restart that keeps the service up, unit by unit (pdctl.checks.rolling says how
units are formed and why), each instance taken out of every router through its worker API before it restarts,
drained, restarted, canaried straight against the decodes still serving, and put back; confirmed each time by
reading the routers' worker lists again.

Stops at the first step that fails and says each unit's state and which workers are out of the routers: a worker
that was restarted and failed stays out (it is not to take traffic); one never touched goes back in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pdctl import audit
from pdctl.checks.rolling import UnitState, drained, form_units, refusal
from pdctl.errors import HazardRefused, PdctlError, StepFailed, as_interrupted, carry_warnings
from pdctl.ops import router_workers as rw
from pdctl.ops.context import Deployment, deployment_lock
from pdctl.ops.sequence import StatesAtInterrupt, StepRecord, restart_one, role_states, run_step
from pdctl.ops.lineage_record import save_lineage_record
from pdctl.ops.verify import HealthReport, final_health
from pdctl.serialize import JSON_OFF, json_key, to_data
from pdctl.role_ref import RoleRef

DRAIN_TIMEOUT_S = 60.0
ROLES = ("prefill", "decode")


@dataclass
class RollingResult:
    dry_run: bool
    plan: list[str]
    units: list[UnitState]
    steps: list[StepRecord] = field(default_factory=list)
    health: HealthReport | None = field(default=None, metadata=json_key("final_health"))
    warnings: list[str] = field(default_factory=list)
    stopped: str | None = None  # why the restart stopped before the last unit, with the states
    order: str | None = None  # why the units are not in index order (pairs known broken first)
    stopped_exit: int = field(default=1, metadata=JSON_OFF)
    roles: tuple[str, ...] = field(default=ROLES, metadata=JSON_OFF)  # what it restarts (the lint gate reads this)
    rolling = True  # says which restart this document is
    json_extra = ("ok", "exit_code", "rolling")

    @property
    def ok(self) -> bool:
        return self.stopped is None and (self.health is None or self.health.ok)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else (self.stopped_exit if self.stopped else 1)


def rolling_plan(dep: Deployment, states: list[UnitState]) -> list[str]:
    label = dep.inv.label
    plan = []
    for s in states:
        u = s.unit
        plan += [f"{u.name}: {label('decode', j)}: out of the routers, drain" for j in u.decodes]
        plan += [f"{u.name}: {label('prefill', i)}: out, drain, restart, canary, back in" for i in u.prefills]
        plan += [f"{u.name}: {label('decode', j)}: restart, canary with each prefill, back in" for j in u.decodes]
        plan.append(f"{u.name}: save the lineage record (every pair canaried since its last restart)")
    return plan + ["final-health"]


def rolling_restart(
    dep: Deployment,
    *,
    dry_run: bool = False,
    drain_timeout: float = DRAIN_TIMEOUT_S,
    verify: bool = True,
    skip_lint: bool = False,
    broken_pairs: Sequence[tuple[int, int]] = (),
    pairs_why: str = "failed their pair canaries",
) -> RollingResult:
    """Restart every prefill and decode without taking the service down. Raises HazardRefused (a router would be
    left without a prefill or a decode), LockHeld, LintRefused, UnreachableError (a router's worker list cannot be
    read before anything is done). A step that fails later does not raise: the result says where it stopped.
    `broken_pairs`: (prefill, decode) indices known broken (the watch's heal: by their canaries; --first-pair: by
    the operator), said in the order line with `pairs_why`: their workers go first."""
    from pdctl.ops.fanout import raise_first_unreachable
    from pdctl.ops.restart import lint_gate

    now = rw.serving(dep)  # raises UnreachableError when a router's list cannot be read: nothing done yet
    first, order, unread = restart_first(dep, now, broken_pairs, pairs_why)
    units = form_units(len(dep.inv.roles.prefill), len(dep.inv.roles.decode), first)
    result = RollingResult(dry_run, [], [UnitState(u) for u in units], order=order)
    if unread:
        result.warnings.append(unread + "; the units go in index order")
    result.plan = rolling_plan(dep, result.units)
    if dry_run:
        _refuse(dep, result, now)
        return result
    states = StatesAtInterrupt(dep)
    with (
        carry_warnings(result.warnings),
        states.carried(),
        audit.audited(
            "restart --rolling",
            inventory=dep.inv.source,
            mark_start=True,
            states=states,
            args={"drain_timeout": drain_timeout, "skip_lint": skip_lint},
        ) as rec,
    ):
        with deployment_lock(dep, "restart --rolling", run=rec.run, states=lambda: role_states(dep)) as lock:
            if lock.took_over:
                result.warnings.append(f"took over the {lock.took_over.describe()}")
            _refuse(dep, result, rw.serving(dep))  # read again under the lock
            lint_gate(dep, result, rec, skip_lint)
            resolved = dep.each_instance(lambda role, k: dep.base_url(role, k), roles=ROLES)
            raise_first_unreachable(resolved)  # a worker that cannot be asked: nothing has been changed yet
            bases = {(r.key[0], r.key[1]): r.value for r in resolved}
            for state in result.units:
                try:
                    _run_unit(dep, state, result.steps, bases, drain_timeout)
                except StepFailed as e:
                    result.stopped, result.stopped_exit = e.message, e.exit_code
                    break
                except KeyboardInterrupt as e:  # the record and the screen say which workers stay out
                    rec.extra["units"] = to_data(result.units)
                    out = [w for s in result.units for w in (s.out or [])]
                    if not out:
                        raise
                    stopped = as_interrupted(e)
                    stopped.notes.append(
                        f"still out of the routers: {', '.join(out)} (restarted, not put "
                        "back); `pdctl restart --rolling` again restarts them first and puts "
                        "them back"
                    )
                    if stopped is e:
                        raise
                    raise stopped from None
                # every pair has been canaried since either of its workers last restarted: the new clean lineage
                save_lineage_record(dep)
            rec.extra.update(units=to_data(result.units), steps=to_data(result.steps), warnings=result.warnings)
            if result.stopped is None:
                if verify:
                    result.health = final_health(dep)
                    rec.extra["final_health"] = to_data(result.health)
        rec.result = (
            "ok"
            if result.ok
            else ("stopped: " + result.stopped.splitlines()[0] if result.stopped else "final-health failed")
        )
        if result.exit_code:  # decides the record's result word: a unit whose host did not answer is unreachable
            rec.extra["exit_code"] = result.exit_code
    return result


def restart_first(
    dep: Deployment, serving, canaried: Sequence[tuple[int, int]] = (), canaried_why: str = "failed their pair canaries"
) -> tuple[list[RoleRef], str | None, str | None]:
    """The workers to restart first: those some router does not route to now (out of its list, or unhealthy
    there: a worker an earlier, stopped run left out, or a dead one), those of the pairs the restart lineage calls
    broken, and those of the pairs `canaried` says failed their canaries (the watch's heal passes them: a pair
    broken for a reason the lineage cannot see, which judges pids and start times). Returns them, the line saying
    why (None without any), and why the lineage could not be read (None when it was)."""
    from pdctl.ops.lineage_record import pair_lineage

    label = dep.inv.label
    declared = [RoleRef(role, k) for role, k, _ in dep.inv.instances() if role in ROLES]
    idle = [w for w in declared if any(w not in set(ws) for ws in serving.values())]
    marks, unread = pair_lineage(dep)
    index = {label(*w): w for w in declared}
    pairs = sorted(
        ((index[p], index[d], kind) for (p, d), kind in marks.items() if p in index and d in index),
        key=lambda t: (t[0][1], t[1][1]),
    )
    failed = [
        (RoleRef("prefill", i), RoleRef("decode", j))
        for i, j in canaried
        if RoleRef("prefill", i) in declared and RoleRef("decode", j) in declared
    ]
    first = list(dict.fromkeys(idle + [w for p, d, _k in pairs for w in (p, d)] + [w for pd in failed for w in pd]))
    why = []
    if idle:
        why.append("not routed to now (out of a router, or unhealthy there): " + ", ".join(label(*w) for w in idle))
    if pairs:
        why.append(
            "the restart lineage calls broken: "
            + "; ".join(f"{label(*p)} -> {label(*d)} ({kind})" for p, d, kind in pairs)
        )
    if failed:
        why.append(f"{canaried_why}: " + "; ".join(f"{label(*p)} -> {label(*d)}" for p, d in failed))
    if not why:
        return [], None, unread
    return first, ("these go first (decodes out in unit 1, prefills rolled first): " + "; and ".join(why)), unread


def _refuse(dep: Deployment, result: RollingResult, serving) -> None:
    why = refusal([s.unit for s in result.units], serving)
    if why:
        raise HazardRefused(
            f"refused: {why}", hint="`pdctl restart --pair` co-restarts everything (the service is down meanwhile)"
        )


def _run_unit(dep: Deployment, state: UnitState, done: list[StepRecord], bases, drain_timeout: float) -> None:
    """One unit (pdctl.checks.rolling); on a failed step, puts back what was never restarted, records the unit's
    state and which workers stay out, and re-raises the StepFailed."""
    unit, label, n_d = state.unit, dep.inv.label, len(dep.inv.roles.decode)
    serving = [j for j in range(n_d) if j not in unit.decodes]
    out: list[RoleRef] = []
    restarted: set[RoleRef] = set()
    state.state = "running"

    prefix = f"{unit.name}: "
    total = len(done) + steps_of(state.unit)

    def step(what: str, action) -> None:
        run_step(dep, prefix + what, action, done, total=total)

    try:
        for j in unit.decodes:
            step(f"{label('decode', j)} out of the routers", lambda j=j: rw.take_out(dep, "decode", j))
            out.append(RoleRef("decode", j))
        for j in unit.decodes:
            step(f"{label('decode', j)} drained", lambda j=j: _wait_drained(dep, "decode", j, bases, drain_timeout))
        for i in unit.prefills:
            step(f"{label('prefill', i)} out of the routers", lambda i=i: rw.take_out(dep, "prefill", i))
            out.append(RoleRef("prefill", i))
            step(f"{label('prefill', i)} drained", lambda i=i: _wait_drained(dep, "prefill", i, bases, drain_timeout))
            restarted.add(RoleRef("prefill", i))
            restart_one(dep, "prefill", i, done, total=total, prefix=prefix)
            step(
                f"canary {label('prefill', i)} with the serving decodes",
                lambda i=i: _canaries(dep, [(i, j) for j in serving], bases),
            )
            step(f"{label('prefill', i)} back in the routers", lambda i=i: rw.put_back(dep, "prefill", i))
            out.remove(RoleRef("prefill", i))
        for j in unit.decodes:
            restarted.add(RoleRef("decode", j))
            restart_one(dep, "decode", j, done, total=total, prefix=prefix)
        step(
            "canary every prefill with " + ", ".join(label("decode", j) for j in unit.decodes),
            lambda: _canaries(dep, [(i, j) for j in unit.decodes for i in unit.prefills], bases),
        )
        for j in unit.decodes:
            step(f"{label('decode', j)} back in the routers", lambda j=j: rw.put_back(dep, "decode", j))
            out.remove(RoleRef("decode", j))
    except (StepFailed, KeyboardInterrupt) as e:  # Ctrl-C too: what was never restarted goes back in
        if isinstance(e, StepFailed):
            state.state, state.detail = f"failed at: {_failed_step(e)}", e.message.splitlines()[0]
        else:
            state.state, state.detail = "interrupted", f"interrupted during: {done[-1].step if done else 'start'}"
        back, kept = _restore_untouched(dep, out, restarted)
        state.out = [label(role, k) for role, k in kept]
        if back:
            state.detail += "; put back (never restarted): " + ", ".join(label(role, k) for role, k in back)
        raise
    state.state, state.out = "done", []


def steps_of(unit) -> int:
    """How many steps a unit takes: per decode out, drained, restart, ready, back in; per prefill out, drained,
    restart, ready, canary, back in; one canary of the group."""
    return 5 * len(unit.decodes) + 6 * len(unit.prefills) + 1


def _failed_step(e: StepFailed) -> str:
    first = e.message.splitlines()[0]
    return first.split("'")[1] if first.startswith("stopped at step '") and first.count("'") >= 2 else first


def _restore_untouched(dep: Deployment, out, restarted) -> tuple[list, list]:
    """Put back the workers taken out but never restarted (they are the old, serving processes); what was
    restarted stays out. Returns (put back, still out)."""
    back, kept = [], []
    for role, k in out:
        if (role, k) in restarted:
            kept.append((role, k))
            continue
        try:
            rw.put_back(dep, role, k)
            back.append((role, k))
        except PdctlError:
            kept.append((role, k))
    return back, kept


def _wait_drained(dep: Deployment, role: str, k: int, bases, limit: float) -> None:
    """Until the worker's inflight gauges are all 0 (its requests finished), within `limit`. Raises StepFailed."""
    from pdctl.checks.inflight import inflight_point
    from pdctl.checks.sampling import fetch_metrics
    from pdctl.poll import poll_until

    timeout = dep.inv.final_health.metrics_timeout

    def gauges() -> dict[str, float]:
        try:
            m = fetch_metrics(bases[(role, k)], timeout=timeout)
        except PdctlError:
            if not dep.status(role, k).active:  # not running (a dead decode): nothing can be in flight on it
                return {}
            raise
        return (inflight_point([m], []) if role == "prefill" else inflight_point([], [m]))[0]

    w = poll_until(
        gauges, drained, timeout=limit, interval=0.2, backoff=1.5, max_interval=1.0, timeout_name="--drain-timeout"
    )
    if not w.ok:
        busy = ", ".join(f"{n}={v:g}" for n, v in w.value.items() if v)
        raise StepFailed(f"{dep.inv.label(role, k)} still has requests after {limit:g}s (--drain-timeout): {busy}")


def _canaries(dep: Deployment, pairs: list[tuple[int, int]], bases) -> None:
    """Canary each (prefill, decode) pair straight to its two workers (pdctl.ops.pairs); StepFailed naming every
    pair that did not pass."""
    from pdctl.ops.pairs import run_canary

    slot = float(dep.inv.final_health.probe.timeout)
    failed = []
    for i, j in pairs:
        r = run_canary(dep, i, j, bases, slot)
        if not r.ok:
            failed.append(f"{dep.inv.label('prefill', i)} -> {dep.inv.label('decode', j)}: {r.found}")
    if failed:
        raise StepFailed("canary failed: " + "; ".join(failed))
