"""`pdctl status`'s router membership: each running router's worker list read (routers in parallel), and each
running prefill and decode's row told whether every router routes to it. Gathers only; the judge is
pdctl.checks.router_membership."""

from __future__ import annotations

import dataclasses

from pdctl.checks.role_status import RoleStatus
from pdctl.checks.router_membership import RouterList, judge_membership
from pdctl.errors import PdctlError, UnreachableError
from pdctl.ops import router_workers as rw
from pdctl.ops.context import Deployment


def router_lists(dep: Deployment, rows: list[RoleStatus]) -> list[RouterList]:
    """The worker list of every router whose row says it runs (a stopped or unknown router's row says that
    already; it has no list to read). A router on a live host that does not answer is a failed read, one whose
    host could not be asked an unknown one (pdctl.ops.router_workers)."""
    running = [r.index for r in rows if r.role == "router" and r.active]

    def one(role: str, r: int) -> RouterList:
        label = dep.inv.label(role, r)
        try:
            return RouterList(label, tuple(rw.workers(dep, r, ask_host=False)))  # its row has just read its host
        except PdctlError as e:
            return RouterList(label, error=e.message.splitlines()[0], unknown=isinstance(e, UnreachableError))

    read = dep.each_instance(lambda role, r: one(role, r) if r in running else None, roles=("router",))
    return [x.value for x in read if x.value is not None]


def with_router_membership(dep: Deployment, rows: list[RoleStatus]) -> list[RoleStatus]:
    """`rows` with each running prefill and decode's `routing` filled in; unchanged when no router runs (then the
    router rows already say why nothing is routed)."""
    lists = router_lists(dep, rows)
    if not lists:
        return rows
    out = []
    for row in rows:
        if row.role == "router" or not row.active:
            out.append(row)
            continue
        urls = {
            dep.inv.label("router", r): rw.url_of(dep, r, row.role, row.index) for r in range(len(dep.inv.roles.router))
        }
        out.append(dataclasses.replace(row, routing=judge_membership(row.role, urls, lists)))
    return out
