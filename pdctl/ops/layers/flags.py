"""The flags layer: the live cmdline and env of each main process (from /proc) against what the inventory
declares, flags the rendered command does not have, each worker's reported version; a router (which hides its
argv) by the workers it routes to. Its watch round judges the lineage layer too, from the same /proc read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pdctl import launch
from pdctl.checks.result import CheckResult, Status
from pdctl.checks.router import judge_router_env, judge_router_workers, title_rewritten
from pdctl.ops.context import Deployment
from pdctl.ops.layers.base import Gathering, Judge, LayerDef, register
from pdctl.ops.layers.lineage import lineage_layer
from pdctl.ops.layers.seen import Seen, targets_on, why
from pdctl.ops.lineage_record import LINEAGE_WINDOW_S, lineage_snapshot, load_lineage_record
from pdctl.ops.processes import LiveProcess, live_processes, live_processes_reached
from pdctl.role_ref import RoleRef
from pdctl.secrets import inventory_secrets, secret_values

#: (role, index) -> the worker's /server_info document (None: it did not answer)
ServerInfos = dict[RoleRef, dict[str, Any] | None]


def server_infos(dep: Deployment, only: set[RoleRef] | None = None) -> ServerInfos:
    """Each worker's /server_info (of `only` when given; None where it does not answer), asked in parallel.
    final-health asks every worker while /proc is still being read, so the flags layer does not wait for these
    round trips after it; the watch asks the live ones it found."""
    from httpx import HTTPError

    from pdctl.checks.http_util import client

    def server_info(role: str, i: int) -> dict[str, Any] | None:
        if only is not None and (role, i) not in only:
            return None
        url = f"{dep.base_url(role, i)}/server_info"
        try:
            body = client().get(url, timeout=dep.inv.final_health.health_timeout).json()
        except (HTTPError, ValueError):
            return None
        return body if isinstance(body, dict) else None

    return {r.key: r.value for r in dep.each_instance(server_info, roles=("prefill", "decode"))}


def _versions(procs: Mapping[str, LiveProcess], infos: ServerInfos) -> list[CheckResult]:
    """One row per live worker: the version its /server_info reports (no row when none)."""
    from pdctl.checks.flags import judge_version

    rows = [
        judge_version(label, infos.get(RoleRef(p.role, p.index)))
        for label, p in procs.items()
        if p.role != "router" and p.process
    ]
    return [row for row in rows if row is not None]


def _router_workers(dep: Deployment, index: int, label: str) -> list[CheckResult]:
    """The router hides its argv; check the workers it routes to instead."""
    from httpx import HTTPError

    from pdctl.checks.http_util import client

    host = dep.instance("router", index).host
    url = f"{dep.base_url('router', index)}/workers"
    body: dict[str, Any] | None
    try:
        body = client().get(url, timeout=dep.inv.final_health.health_timeout).json()
    except (HTTPError, ValueError):
        body = None
    prefill = [
        (launch.worker_url(dep.inv, "prefill", i, host), dep.inv.bootstrap_port(p))
        for i, p in enumerate(dep.inv.roles.prefill)
    ]
    decode = [launch.worker_url(dep.inv, "decode", i, host) for i in range(len(dep.inv.roles.decode))]
    return judge_router_workers(label, body if isinstance(body, dict) else None, prefill, decode)


def flags_layer(dep: Deployment, procs: Mapping[str, LiveProcess], infos: ServerInfos) -> list[CheckResult]:
    """Every instance's live flags and env judged against the inventory, then the workers' versions, then each
    prefill/decode pair's agreement on what the KV transfer needs (their /server_info). Each row is scrubbed of the
    inventory's declared secret values and of its process's own (a live secret-named env var or flag), as `render`
    masks them, so no output built from these results shows one inside an ordinary value."""
    from pdctl.checks.flags import scrub_secrets
    from pdctl.checks.pd_compat import judge_live_pairs

    declared = inventory_secrets(dep.inv)
    results = []
    for label, p in procs.items():
        live = secret_values(p.process.env, p.process.argv) if p.process is not None else set()
        results.extend(scrub_secrets(_process_rows(dep, label, p), declared | live))
    return results + _versions(procs, infos) + scrub_secrets(judge_live_pairs(infos), declared)


def _process_rows(dep: Deployment, label: str, p: LiveProcess) -> list[CheckResult]:
    """One instance's rows: its live flags and env against the inventory (a router by its env and workers)."""
    from pdctl.checks.flags import judge_flags, judge_undeclared

    role, i, info = p.role, p.index, p.process
    if info is None:
        return [
            CheckResult(
                "flags",
                label,
                "main process",
                Status.FAIL,
                observed=p.service.detail or "not running",
                expected="running",
                detail=f"service {dep.inv.service_name(role, i)} has no live main process",
                data={"running": False, "service": dep.inv.service_name(role, i)},  # read by checks.recommend
            )
        ]
    declared_env = launch.declared_env(dep.inv, role, i)
    if role == "router" and title_rewritten(info.argv):
        return judge_router_env(label, info.env, declared_env) + _router_workers(dep, i, label)
    rows = judge_flags(label, info.argv, info.env, launch.declared_flags(dep.inv, role, i), declared_env)
    return rows + judge_undeclared(label, info.argv, launch.role_argv(dep.inv, role, i))


def _start(g: Gathering) -> Judge:
    procs = g.shared("processes", lambda: live_processes(g.dep))
    infos = g.pool.submit(server_infos, g.dep)  # asked beside /proc rather than after it
    return lambda: flags_layer(g.dep, procs.result(), infos.result())


def flags_round(dep: Deployment) -> Seen:
    """Live cmdline/env of every main process against the inventory, and the restart lineage against the
    co-restart record, which is read from the prefill host every round (so a restarted watch judges against
    the same record, never an assumption). A host that does not answer makes its roles unknown."""
    from pdctl.checks.lineage import pair_hazards

    procs, down = live_processes_reached(dep)
    seen = Seen(unknown=targets_on(dep, {h: why(e) for h, e in down.items()}))
    if not procs:
        return seen
    record = load_lineage_record(dep)
    live = {RoleRef(p.role, p.index) for p in procs.values() if p.role != "router" and p.process}
    seen.checks = flags_layer(dep, procs, server_infos(dep, only=live)) + lineage_layer(dep, procs, record)
    starts = lineage_snapshot(procs)
    seen.processes = {label: (pid, start) for label, (_role, pid, start) in starts.items()}
    seen.hazards = {(h.prefill, h.decode): h.hazard for h in pair_hazards(starts, record, LINEAGE_WINDOW_S)}
    return seen


register(LayerDef("flags", start=_start, round=flags_round))
