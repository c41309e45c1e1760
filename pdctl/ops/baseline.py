"""The transfer baseline of final-health (`--record-baseline`, `--since-baseline`): where it is kept, reading it,
and recording it only from every worker's counters (checks.baseline says what a complete read is)."""

from __future__ import annotations

import json

from pdctl import state
from pdctl.checks.baseline import BaselineRecord
from pdctl.checks.metrics import MetricSet
from pdctl.errors import UsageError
from pdctl.ops.context import Deployment
from pdctl.safe_write import write_whole


def read_transfer_counters(dep: Deployment) -> dict[str, MetricSet | Exception]:
    """label -> MetricSet (or the exception that stopped us reading it), for every prefill and decode."""
    from pdctl.checks.metric_names import TRANSFER_READ
    from pdctl.checks.sampling import fetch_metrics

    def one(role: str, i: int) -> MetricSet | Exception:
        try:
            return fetch_metrics(
                dep.base_url(role, i), timeout=dep.inv.final_health.metrics_timeout, families=TRANSFER_READ
            )
        except Exception as e:  # reported as a failed check, never swallowed
            return e

    out: dict[str, MetricSet | Exception] = {}
    for r in dep.each_instance(one, roles=("prefill", "decode")):
        read = r.error if r.error is not None else r.value
        if read is not None:
            out[r.label] = read
    return out


def baseline_path(dep: Deployment):
    return state.state_dir() / f"baseline-{dep.inv.name}.json"


def load_baseline(dep: Deployment) -> dict[str, dict[str, float]]:
    """The failure counters recorded by `record_baseline`. Raises UsageError when none was recorded."""
    path = baseline_path(dep)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        raise UsageError(
            f"no transfer baseline recorded for {dep.inv.name!r} (looked in {path})",
            hint="record one first: pdctl verify final-health --record-baseline",
        ) from None


def record_baseline(dep: Deployment) -> BaselineRecord:
    """Read every prefill's and decode's failure counters and save them as the baseline for later `since_baseline`
    checks, replacing the file whole. When any worker's could not be read, writes nothing (the file there stays as
    it was) and says which and why (checks.baseline); a failed write is said too. Raises nothing for either."""
    from pdctl.checks.baseline import baseline_snapshot

    path = baseline_path(dep)
    snapshot, unread = baseline_snapshot(read_transfer_counters(dep))
    record = BaselineRecord(str(path), recorded=False, workers=list(snapshot), unread=unread, snapshot=snapshot)
    if not unread:
        try:  # whole or not at all: a reader never sees half a baseline; no link followed (safe_write)
            write_whole(path, json.dumps(snapshot), UsageError, "baseline")
            record.recorded = True
        except UsageError as e:
            record.error = f"could not write it: {e.message}"
    record.kept = not record.recorded and path.exists()
    return record


def baseline_warning(dep: Deployment, saved: BaselineRecord | None) -> str:
    """What became of the baseline of a final-health that stopped with an error: `saved` when it was read."""
    if saved is not None:
        return saved.summary + "".join(f"; {label}: {why}" for label, why in saved.unread.items())
    workers = ", ".join(dep.inv.label(r, i) for r, i, _ in dep.inv.instances() if r in ("prefill", "decode"))
    path = baseline_path(dep)
    left = f"{path} kept as it was" if path.exists() else f"nothing written to {path}"
    return f"transfer baseline NOT recorded: final-health stopped before the counters of {workers} were read; {left}"
