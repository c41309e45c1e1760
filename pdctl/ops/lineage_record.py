"""The co-restart record the lineage layer judges against (kept on the first prefill's host, beside the deployment
lock, and locally), and the pair lineage `verify pairs` marks its matrix with. Apart from ops/verify.py so the pairs
op can read it without importing the final-health op that runs the pairs layer."""

from __future__ import annotations

import json
from typing import Any

from pdctl import state
from pdctl.errors import PdctlError
from pdctl.ops.context import Deployment

LINEAGE_WINDOW_S = 900.0  # without a co-restart record: decode/router started this long after prefill = hazard


def host_lineage_path(dep: Deployment) -> tuple[str, str]:
    """(host, path) of the lineage record kept on the first prefill's host, beside the deployment lock."""
    from pdctl.services.connect import default_state_dir

    host = dep.inv.roles.prefill[0].host
    return host, f"{default_state_dir(dep.inv.hosts[host])}/lineage/{dep.inv.name}.json"


def load_lineage_record(dep: Deployment) -> dict[str, Any] | None:
    """The last co-restart's record: the copy on the prefill host (every operator's co-restarts write it), else
    this operator's local copy."""
    host, path = host_lineage_path(dep)
    for raw in (lambda: dep.transport(host).read_file(path), lambda: state.lineage_path(dep.inv.name).read_bytes()):
        try:
            data = raw()
            if data:
                return json.loads(data)
        except (OSError, ValueError, PdctlError):
            continue
    return None


def pair_lineage(dep: Deployment) -> tuple[dict[tuple[str, str], str], str | None]:
    """(prefill label, decode label) -> lineage hazard kind of the running pairs (checks.lineage.pair_hazards), and
    why it could not be read (None when it was). The workers' pids and start times, read per instance."""
    from pdctl.checks.lineage import pair_hazards

    try:
        seen = dep.each_instance(lambda role, k: dep.status(role, k), roles=("prefill", "decode"))
    except PdctlError as e:  # a marking of the matrix: never what stops `verify pairs`
        return {}, f"restart lineage not read: {e.message.splitlines()[0]}"
    failed = next((r for r in seen if r.error is not None), None)
    if failed is not None:
        return {}, f"restart lineage not read: {failed.label}: {failed.error.message.splitlines()[0]}"
    starts = {r.label: (r.key[0], r.value.main_pid, r.value.started_at) for r in seen if r.value.active}
    return {
        (h.prefill, h.decode): h.hazard for h in pair_hazards(starts, load_lineage_record(dep), LINEAGE_WINDOW_S)
    }, None
