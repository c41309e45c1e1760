"""`verify pairs` and final-health's `pairs` layer: a canary for every prefill x decode pair, sent straight to the
pair's two workers (never through the router), gathered; pdctl.checks.pairs judges.

Bounds: the canaries to different decodes run at once; the canaries to one decode run one after another (one
prefill at a time, so a slow answer is that pair's), each within an equal slot of the total budget, so a hung pair
never takes the slot of the next. A canary still unanswered at the end of its slot is not left in a queue: its two
connections are closed (the bundled engine and SGLang abort a request whose client went away) and its request id
is aborted on both workers with SGLang's POST /abort_request {"rid": ...}; the result says what each answered.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from pdctl.checks.pairs import (
    ABORT_PATH,
    FAIL,
    GENERATE_PATH,
    UNKNOWN,
    LegAnswer,
    MatrixVerdict,
    PairResult,
    CanaryBody,
    canary_body,
    NEXT_STATUS,
    both_refused,
    canary_rid,
    fresh_room,
    heal_step,
    judge_matrix,
    judge_pair,
    judge_unasked,
    leg_timed_out,
    pair_check,
)
from pdctl.checks.result import NEXT_TRIAGE, CheckResult, Status
from pdctl.engines import engine_kind
from pdctl.errors import PdctlError
from pdctl.ops.context import Deployment
from pdctl.role_ref import RoleRef

MIN_SLOT_S = 0.5  # a canary gets at least this long, whatever the budget: less cannot move any KV


@dataclass
class PairsReport:
    inventory: str
    budget_s: float
    elapsed_ms: float
    prefills: list[str]  # labels, in matrix row order
    decodes: list[str]  # labels, in matrix column order
    pairs: list[PairResult]
    verdict: MatrixVerdict
    sent_to: str = "each pair's prefill and decode directly, at once (not through a router)"
    notes: list[str] = field(default_factory=list)
    json_extra = ("ok", "exit_code", "next_steps")

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    @property
    def next_steps(self) -> list[str]:
        """A failed pair: triage says why, then the restart that heals it (its workers first on xPyD); pairs that
        pass with a restart-lineage hazard: that restart alone. No restart while a pair is unknown: nothing is
        acted on that could not be seen (the watch's heal refuses too). Every failed pair refused on both sides:
        status first (the workers are down), then triage, no restart."""
        if both_refused(self.pairs):
            return [NEXT_STATUS, NEXT_TRIAGE]
        n_p, n_d = len(self.prefills), len(self.decodes)
        by = {(r.prefill, r.decode): r for r in self.pairs}
        failed = [(i, j) for i in range(n_p) for j in range(n_d) if (i, j) not in by or by[(i, j)].status == FAIL]
        heal = (
            []
            if self.verdict.unknown
            else [heal_step(failed or [(r.prefill, r.decode) for r in self.pairs if r.lineage_hazard], n_p, n_d)]
        )
        return [s for s in ([NEXT_TRIAGE] if failed else []) + heal if s]

    @property
    def exit_code(self) -> int:
        """0 every pair passed; 1 a pair failed (whatever else could not be asked: a failure seen outranks it, as in
        final-health); 3 no pair failed and one is unknown (a host did not answer: the matrix is incomplete)."""
        return 0 if self.ok else (1 if self.verdict.failed else 3)


def _leg(url: str, body: CanaryBody, timeout: float) -> LegAnswer:
    """POST the canary to one worker and read its whole answer, within `timeout`. Never raises. On a timeout the
    client closes the connection (httpx never pools a connection a request failed on)."""
    from httpx import ConnectTimeout

    from pdctl.checks.http_util import client, describe_error, request_ms

    c = client()
    started = time.monotonic()
    try:
        r = c.post(f"{url.rstrip('/')}{GENERATE_PATH}", json=body, timeout=timeout)
    except Exception as e:
        return LegAnswer(
            error=describe_error(e, timeout, url, since=started),
            unreachable=isinstance(e, ConnectTimeout),
            ms=request_ms(None, started),
        )
    try:
        parsed: Any = r.json()
    except ValueError:
        parsed = r.text
    return LegAnswer(r.status_code, parsed, ms=request_ms(r, started))


def _abort(url: str, label: str, rid: str, timeout: float) -> str:
    """Abort the canary's request id on one worker; what it answered, for the report."""
    from pdctl.checks.http_util import client, describe_error

    try:
        r = client().post(f"{url.rstrip('/')}{ABORT_PATH}", json={"rid": rid, "abort_all": False}, timeout=timeout)
    except Exception as e:
        return f"abort of {rid} on {label}: {describe_error(e, timeout, url)}"
    return f"aborted {rid} on {label} (HTTP {r.status_code})"


def run_canary(
    dep: Deployment,
    i: int,
    j: int,
    bases: dict[RoleRef, str],
    slot: float,
    prompt: tuple[str, int] | None = None,
) -> PairResult:
    """One pair's canary: the same body to prefill i and decode j at once, judged. `prompt`: (text, max tokens)
    instead of final-health's probe."""
    p_inst, d_inst = dep.instance("prefill", i), dep.instance("decode", j)
    p = dep.inv.final_health.probe
    text, max_tokens = prompt or (p.prompt, p.max_tokens)
    room = fresh_room()
    body = canary_body(
        prompt=text,
        max_tokens=max_tokens,
        room=room,
        model=p.model or dep.inv.served_model_name,
        # where decode j reaches prefill i's bootstrap server, as the router names it
        bootstrap_host=dep.inv.address_from(p_inst.host, d_inst.host),
        bootstrap_port=dep.inv.bootstrap_port(p_inst),
    )
    got: dict[str, LegAnswer] = {}
    legs = {
        role: threading.Thread(
            target=lambda role=role, k=k: got.setdefault(role, _leg(bases[RoleRef(role, k)], body, slot)),
            name=f"canary-{role}-prefill{i}-decode{j}",
            daemon=True,
        )
        for role, k in (("prefill", i), ("decode", j))
    }
    for t in legs.values():
        t.start()
    aborted: list[str] = []

    def abort_leg(role: str, k: int, because: str) -> None:
        health = dep.inv.final_health.health_timeout
        aborted.append(_abort(bases[RoleRef(role, k)], dep.inv.label(role, k), canary_rid(room), health) + because)

    deadline = time.monotonic() + slot + 5  # _leg is bounded by `slot`; the margin only covers a thread scheduled late
    while legs["prefill"].is_alive() and time.monotonic() < deadline:
        legs["prefill"].join(0.05)
        gone = got.get("decode")
        if gone is not None and gone.status_code != 200 and legs["prefill"].is_alive():
            # the decode refused or failed (a killed decode): the prefill would hold the room for a bootstrap that
            # never comes, for the whole slot; abort it now
            abort_leg("prefill", i, " (the decode had failed)")
            legs["prefill"].join(max(0.0, deadline - time.monotonic()))
    early = got.get("prefill")
    if early is not None and early.status_code != 200 and legs["decode"].is_alive():
        # the prefill already said the pair failed: the decode would wait for KV that never comes (SGLang: up to
        # its 300 s waiting timeout); abort it now rather than hold the matrix for the whole slot
        abort_leg("decode", j, " (the prefill had failed)")
    legs["decode"].join(slot + 5)
    prefill_leg = got.get("prefill") or LegAnswer(error=f"no response within {slot:g}s")
    got.setdefault("decode", LegAnswer(error=f"no response within {slot:g}s"))
    if leg_timed_out(prefill_leg) or leg_timed_out(got["decode"]):
        rid = canary_rid(room)
        health = dep.inv.final_health.health_timeout
        aborted = (
            ["closed both connections"]
            + aborted
            + [
                _abort(bases[RoleRef(role, k)], dep.inv.label(role, k), rid, health)
                for role, k in (("prefill", i), ("decode", j))
            ]
        )
    return judge_pair(
        i,
        j,
        room,
        prefill_leg,
        got["decode"],
        aborted,
        repeats_on_failure=engine_kind(dep.inv.engine).repeats_token_on_failed_transfer,
    )


@dataclass
class _Reach:
    """Which prefills and decodes can be asked: the base URL of each that can, why each other cannot, and the first
    error met (the one to raise when no pair can be asked at all)."""

    bases: dict[RoleRef, str]
    unasked: dict[RoleRef, str]
    first: PdctlError | None


def _reach(dep: Deployment, down: dict[str, str]) -> _Reach:
    """Ask every host of the prefills and decodes not in `down` (host -> why: already known not to answer), then
    each of their workers' base URL (over a tunnel this connects). A host that does not answer makes its workers
    unasked, never the others; a refused host key raises (HostKeyRefused: the operator's decision, exit 4)."""
    from pdctl.errors import RefusedError, UnreachableError

    roles = ("prefill", "decode")
    down = dict(down)
    first: PdctlError | None = None
    for host in dep.each_host(lambda h: None if h in down else dep.transport(h).reach(), roles=roles):
        if isinstance(host.error, RefusedError):
            raise host.error
        if host.error is not None:
            down[host.key] = host.error.message.splitlines()[0]
            first = first or host.error
    unasked: dict[RoleRef, str] = {}
    for role, k, inst in dep.inv.instances():
        if role in roles and inst.host in down:
            unasked[RoleRef(role, k)] = f"{role}: host {inst.host} did not answer: {down[inst.host]}"
            first = first or UnreachableError(unasked[RoleRef(role, k)], target=inst.host)
    # base URLs before any canary: a worker whose tunnel cannot be made is said, not canaried
    resolved = dep.each_instance(
        lambda role, k: None if RoleRef(role, k) in unasked else dep.base_url(role, k), roles=roles
    )
    for r in resolved:
        if isinstance(r.error, RefusedError):
            raise r.error
        if r.error is not None:
            unasked[r.key] = f"{r.key.role}: {r.error.message.splitlines()[0]}"
            first = first or r.error
    bases = {r.key: r.value for r in resolved if r.value is not None and r.key not in unasked}
    return _Reach(bases, unasked, first)


def verify_pairs(
    dep: Deployment,
    budget: float | None = None,
    *,
    lineage: bool = True,
    down: dict[str, str] | None = None,
    prompt: tuple[str, int] | None = None,
) -> PairsReport:
    """Canary every prefill x decode pair whose two hosts answer, within `budget` seconds (default:
    final_health.probe.timeout); a pair on a host that does not answer (or in `down`: host -> why, known already)
    is unknown, and the others are still canaried and judged. With `lineage`, then mark each pair's restart-lineage
    hazard (a marking: the verdict is the canaries'). Never raises for a broken pair, nor for a host that does not
    answer while a pair can still be asked; raises UnreachableError when none can (every prefill's or every
    decode's host is silent), HostKeyRefused when a host's key is refused. `prompt`: (text, max tokens) sent
    instead of final-health's probe (verify outputs' consensus prompt)."""
    from pdctl.ops.fanout import fan_out

    inv = dep.inv
    budget = float(budget if budget is not None else inv.final_health.probe.timeout)
    n_p, n_d = len(inv.roles.prefill), len(inv.roles.decode)
    reach = _reach(dep, down or {})
    bases, unasked = reach.bases, reach.unasked
    silent = {
        role for role, n in (("prefill", n_p), ("decode", n_d)) if all(RoleRef(role, k) in unasked for k in range(n))
    }
    if reach.first is not None and silent:  # no pair can be asked: fail naming the host, as every command does
        raise reach.first
    slot = max(MIN_SLOT_S, budget / n_p)
    started = time.monotonic()

    def pair(i: int, j: int) -> PairResult:
        sides = [unasked[ref] for ref in (RoleRef("prefill", i), RoleRef("decode", j)) if ref in unasked]
        return judge_unasked(i, j, "; ".join(sides)) if sides else run_canary(dep, i, j, bases, slot, prompt)

    def column(j: int) -> list[PairResult]:
        return [pair(i, j) for i in range(n_p)]

    columns = fan_out([(inv.label("decode", j), j) for j in range(n_d)], column, bound=max(1, n_d))
    results: list[PairResult] = []
    for col in columns:  # a column whose host could not be asked mid-way: its pairs unknown, the others stand
        lost = "" if col.error is None else col.error.message.splitlines()[0]
        results += col.value if col.value is not None else [judge_unasked(i, col.key, lost) for i in range(n_p)]
    results.sort(key=lambda r: (r.prefill, r.decode))
    notes = [f"each canary had {slot:g}s of the {budget:g}s budget; one past it is closed and aborted"]
    if not any(r.kv_transfer_ms is not None for r in results):
        notes.append("no KV transfer time reported: cells show the decode's answer time")
    if unasked:
        notes.append(f"{len(unasked)} worker(s) not asked (a host did not answer): their pairs are unknown")
    if lineage and unasked:  # its read asks every worker's host: one that did not answer would be waited for again
        notes.append("restart lineage not read: a host did not answer")
    elif lineage:
        from pdctl.ops.lineage_record import pair_lineage

        marks, unread = pair_lineage(dep)
        for r in results:
            r.lineage_hazard = marks.get((inv.label("prefill", r.prefill), inv.label("decode", r.decode)))
        notes += [unread] if unread else []
    return PairsReport(
        inv.name,
        budget,
        round((time.monotonic() - started) * 1000, 1),
        [inv.label("prefill", i) for i in range(n_p)],
        [inv.label("decode", j) for j in range(n_d)],
        results,
        judge_matrix(results, n_p, n_d),
        notes=notes,
    )


def pairs_layer(dep: Deployment) -> list[CheckResult]:
    """final-health's optional `pairs` layer: one row per pair. A pair that is unknown (its host did not answer)
    stops final-health with exit 3, as every layer does: it says nothing about the deployment."""
    from pdctl.errors import UnreachableError

    rep = verify_pairs(dep, lineage=False)  # final-health has its own lineage layer
    unknown = [r for r in rep.pairs if r.status == UNKNOWN]
    if unknown:
        raise UnreachableError(f"unknown: {unknown[0].name}: {unknown[0].found}", target=unknown[0].name)
    rows = [pair_check(r, rep.prefills[r.prefill], rep.decodes[r.decode]) for r in rep.pairs]
    for name in rep.verdict.missing:  # judge_matrix counts a pair with no result as failed: so does the layer
        rows.append(CheckResult("pairs", name, "canary", Status.FAIL, observed="no result", expected="a canary result"))
    return rows
