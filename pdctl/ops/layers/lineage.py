"""The lineage layer: each live main process's pid and start time against the last co-restart record (a decode
or router restarted alone after its prefill is the seed's degraded-bootstrap hazard), and the restarts systemd
made on its own (NRestarts). It reads the same /proc observation as the flags layer, whose watch round judges it
too (checks/layers.py: cadence "flags")."""

from __future__ import annotations

from collections.abc import Mapping

from pdctl.checks.lineage_record import LineageRecord
from pdctl.checks.result import CheckResult
from pdctl.checks.systemd_restarts import UnitRestarts
from pdctl.engines import engine_kind
from pdctl.ops.context import Deployment
from pdctl.ops.layers.base import Gathering, Judge, LayerDef, register
from pdctl.ops.lineage_record import LINEAGE_WINDOW_S, lineage_snapshot, load_lineage_record
from pdctl.ops.processes import LiveProcess, live_processes


def unit_restarts(procs: Mapping[str, LiveProcess]) -> dict[str, UnitRestarts]:
    """label -> UnitRestarts of the running services whose manager counts its own restarts (systemd's NRestarts).
    Pure."""
    from pdctl.services.systemd import unit_name

    return {
        label: UnitRestarts(
            p.role, unit_name(p.service.name), p.service.restarts, p.service.main_pid, p.service.started_at
        )
        for label, p in procs.items()
        if p.active and p.service.restarts is not None
    }


def lineage_layer(dep: Deployment, procs: Mapping[str, LiveProcess], record: LineageRecord | None) -> list[CheckResult]:
    """The lineage judge over the live processes and the co-restart record, then systemd's own restarts."""
    from pdctl.checks.lineage import judge_lineage
    from pdctl.checks.systemd_restarts import judge_systemd_restarts

    known = engine_kind(dep.inv.engine).hazard(dep.inv.transfer_backend)
    return judge_lineage(lineage_snapshot(procs), record, LINEAGE_WINDOW_S, known=known) + judge_systemd_restarts(
        unit_restarts(procs)
    )


def _start(g: Gathering) -> Judge:
    procs = g.shared("processes", lambda: live_processes(g.dep))
    record = g.pool.submit(load_lineage_record, g.dep)  # read beside /proc rather than after it
    return lambda: lineage_layer(g.dep, procs.result(), record.result())


register(LayerDef("lineage", start=_start))
