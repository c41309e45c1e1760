"""The co-restart record the lineage layer judges against (kept on the first prefill's host, beside the deployment
lock, and locally): its reader, its writer (after a clean co-start), and the pair lineage `verify pairs` marks its
matrix with. Apart from the final-health op so the pairs op can read it without importing the op that runs the
pairs layer."""

from __future__ import annotations

from collections.abc import Mapping

from pdctl import state
from pdctl.checks.lineage_record import LineageRecord
from pdctl.errors import PdctlError, UsageError
from pdctl.ops.context import Deployment
from pdctl.ops.processes import LiveProcess, live_processes
from pdctl.safe_write import write_whole

#: label -> (role, pid, start epoch) of a live main process: what checks.lineage judges
Starts = dict[str, tuple[str, int, float | None]]
LINEAGE_WINDOW_S = 900.0  # without a co-restart record: decode/router started this long after prefill = hazard


def host_lineage_path(dep: Deployment) -> tuple[str, str]:
    """(host, path) of the lineage record kept on the first prefill's host, beside the deployment lock."""
    from pdctl.services.connect import default_state_dir

    host = dep.inv.roles.prefill[0].host
    return host, f"{default_state_dir(dep.inv.hosts[host])}/lineage/{dep.inv.name}.json"


def lineage_snapshot(procs: Mapping[str, LiveProcess]) -> Starts:
    """label -> (role, pid, start_epoch) of the live main processes (a service with no main pid has none). Pure."""
    return {
        label: (p.role, p.service.main_pid, p.service.started_at)
        for label, p in procs.items()
        if p.active and p.service.main_pid is not None
    }


def save_lineage_record(dep: Deployment, procs: Mapping[str, LiveProcess] | None = None) -> LineageRecord:
    """Remember the pids and start times of a clean co-start, for the lineage layer of later checks: written on
    the prefill host (shared by all operators) and locally (replaced whole, no link followed: safe_write). Raises
    UnreachableError/RefusedError when a host cannot be asked (its processes would be missing from the record),
    UsageError naming the local copy when it is refused or cannot be written."""
    record = LineageRecord.of(lineage_snapshot(procs if procs is not None else live_processes(dep)))
    text = record.dump()
    host, path = host_lineage_path(dep)
    dep.transport(host).put_file(path, text)
    write_whole(state.lineage_path(dep.inv.name), text, UsageError, "lineage record")
    return record


def load_lineage_record(dep: Deployment) -> LineageRecord | None:
    """The last co-restart's record: the copy on the prefill host (every operator's co-restarts write it), else
    this operator's local copy. A copy that cannot be read, or is not a record, is skipped."""
    host, path = host_lineage_path(dep)
    for raw in (lambda: dep.transport(host).read_file(path), lambda: state.lineage_path(dep.inv.name).read_bytes()):
        try:
            record = LineageRecord.parse(raw())
        except (OSError, PdctlError):
            continue
        if record is not None:
            return record
    return None


def pair_lineage(dep: Deployment) -> tuple[dict[tuple[str, str], str], str | None]:
    """(prefill label, decode label) -> lineage hazard kind of the running pairs (checks.lineage.pair_hazards), and
    why it could not be read (None when it was). The workers' pids and start times, read per instance."""
    from pdctl.checks.lineage import pair_hazards

    try:
        seen = dep.each_instance(lambda role, k: dep.status(role, k), roles=("prefill", "decode"))
    except PdctlError as e:  # a marking of the matrix: never what stops `verify pairs`
        return {}, f"restart lineage not read: {e.message.splitlines()[0]}"
    starts: Starts = {}
    for r in seen:
        if r.error is not None:
            return {}, f"restart lineage not read: {r.label}: {r.error.message.splitlines()[0]}"
        st = r.value
        if st is not None and st.active and st.main_pid is not None:
            starts[r.label] = (r.key[0], st.main_pid, st.started_at)
    hazards = pair_hazards(starts, load_lineage_record(dep), LINEAGE_WINDOW_S)
    return {(h.prefill, h.decode): h.hazard for h in hazards}, None
