"""One round of each of `pdctl watch`'s cadences: what it asks the deployment, reusing final-health's gatherers and
the checks' probes, per target, so that a host that does not answer makes ITS targets unknown and the rest are
still watched (final-health stops at such a host instead). A round never raises for an unhealthy or unreachable
deployment; it returns what it saw for checks.watch_state to fold in."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pdctl.checks.result import CheckResult
from pdctl.errors import PdctlError
from pdctl.engines import engine_kind
from pdctl.ops.context import Deployment


@dataclass
class Seen:
    """What one round saw."""

    checks: list[CheckResult] = field(default_factory=list)
    unknown: dict[str, str] = field(default_factory=dict)  # target -> why it could not be asked
    point: Any = None  # inflight: a checks.inflight.Point
    pairs: list[tuple[str, str, str, float | None]] = field(default_factory=list)  # (p, d, status, latency s)
    hazards: dict[tuple[str, str], str] | None = None  # lineage: (prefill, decode) -> kind
    processes: dict[str, tuple[int | None, float | None]] = field(default_factory=dict)


def _why(e: BaseException) -> str:
    return (getattr(e, "message", None) or str(e) or type(e).__name__).splitlines()[0]


def unreachable_hosts(dep: Deployment, roles=None) -> dict[str, str]:
    """host -> why, for each non-local host that runs a role (of `roles`) and does not answer a `true` within its
    connect timeout (the kept connection makes it one round trip). A local host always answers."""

    def reach(name: str) -> None:
        if dep.inv.hosts[name].transport != "local":
            dep.transport(name).run("true", timeout=dep.inv.hosts[name].connect_timeout + 5)

    return {r.label: _why(r.error) for r in dep.each_host(reach, roles=roles) if not r.reached}


def _targets_on(dep: Deployment, hosts: dict[str, str], roles=None) -> dict[str, str]:
    return {
        dep.inv.label(role, i): f"unknown: host {inst.host} did not answer: {hosts[inst.host]}"
        for role, i, inst in dep.inv.instances()
        if inst.host in hosts and (roles is None or role in roles)
    }


def _per_instance(dep: Deployment, fn, roles=None) -> Seen:
    """fn(role, index) -> [CheckResult] for every instance on a host that answers; the others unknown."""
    down = unreachable_hosts(dep)
    seen = Seen(unknown=_targets_on(dep, down, roles))
    wanted = [(r, i) for r, i, inst in dep.inv.instances() if inst.host not in down and (roles is None or r in roles)]
    for r in dep.each_instance(lambda role, i: fn(role, i) if (role, i) in wanted else None, roles=roles):
        if not r.reached:
            seen.unknown[r.label] = f"unknown: {_why(r.error)}"
        for check in r.value or []:
            check.target = r.label
            seen.checks.append(check)
    return seen


def health_round(dep: Deployment) -> Seen:
    """GET /health of every role, and the router's /readiness with every declared worker (final-health's layer)."""
    from pdctl.ops.verify import health_probes

    return _per_instance(dep, lambda role, i: health_probes(dep, role, i))


def e2e_round(dep: Deployment) -> Seen:
    """One chat completion through each router, content checked (final-health's e2e probe)."""
    from pdctl.checks.e2e import probe_chat

    p = dep.inv.final_health.probe
    model = p.model or dep.inv.served_model_name
    repeats = engine_kind(dep.inv.engine).repeats_token_on_failed_transfer
    return _per_instance(
        dep,
        lambda role, i: [
            probe_chat(
                dep.base_url(role, i),
                model=model,
                prompt=p.prompt,
                max_tokens=p.max_tokens,
                timeout=p.timeout,
                repeats_on_failure=repeats,
            )
        ],
        roles=("router",),
    )


def inflight_round(dep: Deployment) -> Seen:
    """One read of every prefill's and decode's /metrics (ops.inflight.read_point on the monotonic clock): the PD
    queue gauges for the sliding window, and the failure counters; none while a prefill's or decode's host does not
    answer (the check is then unknown, not failed)."""
    from pdctl.checks.inflight import TARGET
    from pdctl.ops.inflight import read_point

    down = unreachable_hosts(dep, roles=("prefill", "decode"))
    if down:  # no sample, and the window is left as it was: a host that did not answer is no finding
        why = "; ".join(f"host {h} did not answer: {w}" for h, w in down.items())
        return Seen(unknown={TARGET: f"unknown: {why}"})
    return Seen(point=read_point(dep, 0.0, clock=time.monotonic))


def pairs_round(dep: Deployment) -> Seen:
    """A canary for every prefill x decode pair (ops.pairs.verify_pairs, its lineage marking left to the flags
    round). A host that cannot be asked makes every pair unknown: the matrix is not judged piecemeal."""
    from pdctl.checks.pairs import UNKNOWN, pair_check
    from pdctl.ops.pairs import verify_pairs

    inv = dep.inv
    names = {
        (inv.label("prefill", i), inv.label("decode", j)): f"prefill[{i}] -> decode[{j}]"
        for i in range(len(inv.roles.prefill))
        for j in range(len(inv.roles.decode))
    }
    try:
        rep = verify_pairs(dep, lineage=False)
    except PdctlError as e:
        why = f"unknown: {_why(e)}"
        return Seen(unknown={name: why for name in names.values()}, pairs=[(p, d, UNKNOWN, None) for p, d in names])
    seen = Seen()
    for r in rep.pairs:
        p, d = rep.prefills[r.prefill], rep.decodes[r.decode]
        ms = r.kv_transfer_ms if r.kv_transfer_ms is not None else r.decode_ms
        seen.pairs.append((p, d, r.status, None if ms is None else ms / 1000.0))
        if r.status == UNKNOWN:
            seen.unknown[r.name] = f"unknown: {r.found}"
        else:
            seen.checks.append(pair_check(r, p, d))
    return seen


def flags_round(dep: Deployment) -> Seen:
    """Live cmdline/env of every main process against the inventory, and the restart lineage against the
    co-restart record, which is read from the prefill host every round (so a restarted watch judges against
    the same record, never an assumption)."""
    from pdctl.checks.lineage import pair_hazards
    from pdctl.ops.verify import (
        LINEAGE_WINDOW_S,
        _flags_layer,
        _lineage_layer,
        lineage_snapshot,
        live_processes_reached,
        load_lineage_record,
        server_infos,
    )

    procs, down = live_processes_reached(dep)
    seen = Seen(unknown=_targets_on(dep, {h: _why(e) for h, e in down.items()}))
    if not procs:
        seen.hazards = None
        return seen
    record = load_lineage_record(dep)
    live = {(role, i) for role, i, _st, info in procs.values() if role != "router" and info}
    seen.checks = _flags_layer(dep, procs, server_infos(dep, only=live)) + _lineage_layer(dep, procs, record)
    starts = lineage_snapshot(procs)
    seen.processes = {label: (pid, start) for label, (_role, pid, start) in starts.items()}
    seen.hazards = {(h.prefill, h.decode): h.hazard for h in pair_hazards(starts, record, LINEAGE_WINDOW_S)}
    return seen


ROUNDS = {
    "health": health_round,
    "inflight": inflight_round,
    "e2e": e2e_round,
    "pairs": pairs_round,
    "flags": flags_round,
}
