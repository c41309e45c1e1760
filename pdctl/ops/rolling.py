"""`pdctl restart --rolling`: the co-restart that keeps the service up, unit by unit (pdctl.checks.rolling says how
units are formed and why), each instance taken out of every router through its worker API before it restarts,
drained, restarted, canaried straight against the decodes still serving, and put back; confirmed each time by
reading the routers' worker lists again.

Stops at the first step that fails (or at an interrupt) and says what it left each worker as (restarted and back,
restarted and still out, restart begun and not finished, taken out and put back, untouched) and which are out of
the routers: a worker restarted and not canaried stays out (it is not to take traffic); one never restarted, or
restarted and canaried, goes back in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pdctl import audit
from pdctl.checks.rolling import ROLLING_COMMAND, UnitState, drained, form_units, refusal
from pdctl.checks.rolling_progress import SAFE_TO_PUT_BACK, Progress, left_lines, still_out
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
    left: list[str] = field(default_factory=list)  # a stopped run: what each worker was left as, and what next
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
    left without a prefill or a decode), LockHeld, LintRefused, StepFailed (a router on a live host does not answer
    its worker API) or UnreachableError (nor does its host) before anything is done. A step that fails later does
    not raise: the result says where it stopped and what it left each worker as.
    `broken_pairs`: (prefill, decode) indices known broken (the watch's heal: by their canaries; --first-pair: by
    the operator), said in the order line with `pairs_why`: their workers go first."""
    from pdctl.ops.fanout import raise_first_unreachable
    from pdctl.ops.restart import lint_gate

    now = rw.serving(dep)  # raises when a router's list cannot be read: nothing done yet
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
            args={"drain_timeout": drain_timeout, "skip_lint": skip_lint, "verify": verify},  # verify: see ops.restart
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
                    result.left = left_by(dep, result.units)
                    break
                except KeyboardInterrupt as e:  # the record and the screen say what each worker was left as
                    result.left = left_by(dep, result.units)
                    rec.extra["units"] = to_data(result.units)
                    if not result.left:
                        raise
                    stopped = as_interrupted(e)
                    stopped.notes += result.left
                    if stopped is e:
                        raise
                    raise stopped from None
                # every pair has been canaried since either of its workers last restarted: the new clean lineage
                save_lineage_record(dep)
            rec.extra.update(
                units=to_data(result.units), steps=to_data(result.steps), warnings=result.warnings, left=result.left
            )
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


def left_by(dep: Deployment, units: list[UnitState]) -> list[str]:
    """What a stopped run left (pdctl.checks.rolling_progress.left_lines) and the next step: [] when it had not
    touched any worker yet."""
    progress = [u.workers for u in units]
    if all(p is Progress.UNTOUCHED for u in progress for p in u.values()):
        return []
    lines = ["the rolling restart left each worker as follows:"]
    lines += [f"  {line}" for line in left_lines(progress, dep.inv.label)]
    out = still_out(progress)
    if out:
        them = "them" if len(out) > 1 else "it"
        lines.append(
            f"still out of the routers: {', '.join(dep.inv.label(*w) for w in out)}; `{ROLLING_COMMAND}` again "
            f"restarts {them} first and puts {them} back (the service stays up)"
        )
    else:
        lines.append(f"nothing is out of the routers; `{ROLLING_COMMAND}` again finishes the co-restart")
    return lines


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
    """One unit (pdctl.checks.rolling), each member's Progress moved before the action it names can begin
    (pdctl.checks.rolling_progress). On a failed step or an interrupt, puts back what is safe to put back (never
    restarted, or restarted and canaried), records the unit's state and which members stay out, and re-raises."""
    unit, label, n_d = state.unit, dep.inv.label, len(dep.inv.roles.decode)
    serving = [j for j in range(n_d) if j not in unit.decodes]
    seen = state.workers
    state.state = "running"

    prefix = f"{unit.name}: "
    total = len(done) + steps_of(state.unit)

    doing = ["start"]  # the step under way: an interrupt's detail names it, not the last one done

    def step(what: str, action) -> None:
        doing[0] = prefix + what
        run_step(dep, prefix + what, action, done, total=total)

    def restart(w: RoleRef) -> None:
        doing[0] = f"{prefix}restart {label(*w)}"
        restart_one(dep, *w, done, total=total, prefix=prefix)

    decodes = [RoleRef("decode", j) for j in unit.decodes]
    try:
        for d in decodes:
            seen[d] = Progress.OUT  # before the DELETE: an interrupt inside the step may land after it was sent
            step(f"{label(*d)} out of the routers", lambda d=d: rw.take_out(dep, *d))
        for d in decodes:
            step(f"{label(*d)} drained", lambda d=d: _wait_drained(dep, d.role, d.number, bases, drain_timeout))
        for i in unit.prefills:
            p = RoleRef("prefill", i)
            seen[p] = Progress.OUT
            step(f"{label(*p)} out of the routers", lambda p=p: rw.take_out(dep, *p))
            step(f"{label(*p)} drained", lambda p=p: _wait_drained(dep, p.role, p.number, bases, drain_timeout))
            seen[p] = Progress.RESTARTING  # before the stop: it may be stopped when an interrupt lands
            restart(p)
            seen[p] = Progress.RESTARTED
            step(
                f"canary {label(*p)} with the serving decodes",
                lambda i=i: _canaries(dep, [(i, j) for j in serving], bases),
            )
            seen[p] = Progress.CANARIED
            step(f"{label(*p)} back in the routers", lambda p=p: rw.put_back(dep, *p))
            seen[p] = Progress.BACK
        for d in decodes:
            seen[d] = Progress.RESTARTING
            restart(d)
            seen[d] = Progress.RESTARTED
        step(
            "canary every prefill with " + ", ".join(label(*d) for d in decodes),
            lambda: _canaries(dep, [(i, j) for j in unit.decodes for i in unit.prefills], bases),
        )
        for d in decodes:
            seen[d] = Progress.CANARIED
        for d in decodes:
            step(f"{label(*d)} back in the routers", lambda d=d: rw.put_back(dep, *d))
            seen[d] = Progress.BACK
    except (StepFailed, KeyboardInterrupt) as e:  # Ctrl-C too: what is safe to serve goes back in
        if isinstance(e, StepFailed):
            state.state, state.detail = f"failed at: {_failed_step(e)}", e.message.splitlines()[0]
        else:
            state.state, state.detail = "interrupted", f"interrupted during: {doing[0]}"
        refused = _put_back_safe(dep, seen)
        state.out = [label(*w) for w in state.still_out()]
        if refused:
            state.detail += "; could not put back: " + "; ".join(f"{label(*w)}: {why}" for w, why in refused)
        raise
    state.state, state.out = "done", []


def steps_of(unit) -> int:
    """How many steps a unit takes: per decode out, drained, restart, ready, back in; per prefill out, drained,
    restart, ready, canary, back in; one canary of the group."""
    return 5 * len(unit.decodes) + 6 * len(unit.prefills) + 1


def _failed_step(e: StepFailed) -> str:
    first = e.message.splitlines()[0]
    return first.split("'")[1] if first.startswith("stopped at step '") and first.count("'") >= 2 else first


def _put_back_safe(dep: Deployment, seen: dict[RoleRef, Progress]) -> list[tuple[RoleRef, str]]:
    """Put back each worker of a stopped unit that may serve (pdctl.checks.rolling_progress.SAFE_TO_PUT_BACK: the
    old process, never restarted, or a restarted one whose canary passed); one restarted and not canaried, or
    whose restart did not finish, stays out. Moves their Progress; returns those that could not be put back, with
    why."""
    refused = []
    for w, p in list(seen.items()):
        if p not in SAFE_TO_PUT_BACK:
            continue
        try:
            rw.put_back(dep, *w)
        except PdctlError as e:
            refused.append((w, e.message.splitlines()[0]))
            continue
        seen[w] = Progress.PUT_BACK if p is Progress.OUT else Progress.BACK
    return refused


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
