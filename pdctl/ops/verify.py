"""`verify final-health`: the seed's closing check as layers, independent probes run in parallel.

The layers are registered in pdctl/ops/layers/ (one module each, metadata in checks/layers.py): health (every
role), e2e (a chat completion through each router, content checked), transfer (transfer_failed and
bootstrap_failed are 0, or not increased since a baseline), flags (live cmdline/env of each main process against
the inventory), lineage (a decode/router restarted alone after its prefill, by an operator or by systemd on its
own), and optionally inflight (issue 4's verdict over a window) and pairs (a canary for every prefill x decode
pair). This module runs the asked ones and keeps the report; it judges nothing.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from pdctl.checks.baseline import BaselineRecord
from pdctl.checks.layers import DEFAULT_LAYERS
from pdctl.checks.result import CheckResult, Status
from pdctl.errors import PdctlError
from pdctl.ops.baseline import baseline_warning, load_baseline, record_baseline
from pdctl.ops.context import Deployment
from pdctl.ops.layers import LAYER_DEFS
from pdctl.ops.layers.base import Gathering, Judge, TransferBaseline

from pdctl.progress import Event


@dataclass
class HealthReport:
    inventory: str
    layers: dict[str, list[CheckResult]] = field(default_factory=dict)
    baseline: BaselineRecord | None = None  # what --record-baseline did (None: not asked)
    json_extra = ("ok",)
    json_omit_empty = ("baseline",)

    @property
    def ok(self) -> bool:
        """Every check passed or warned: none failed and none could not be asked."""
        return not self.failures() and not self.unknown()

    def unknown(self) -> list[CheckResult]:
        """Every check whose target could not be asked (a host that did not answer): never a pass."""
        return [r for rs in self.layers.values() for r in rs if r.status is Status.UNKNOWN]

    def failures(self) -> list[CheckResult]:
        """Every failed check of every layer, then a baseline that was asked for and not recorded."""
        baseline = self.baseline.checks() if self.baseline is not None else []
        return [r for rs in self.layers.values() for r in rs if r.failed] + baseline


def final_health_with_baseline(
    dep: Deployment, *, since_baseline: bool, record: bool, layers: tuple[str, ...] = DEFAULT_LAYERS
) -> HealthReport:
    """final-health that compares transfer failures with the recorded baseline (`since_baseline`) and saves the
    counters as the new baseline (`record`) before the layers run, so a transfer the e2e probe fails counts against
    it (playbooks/deploy-fix.yaml). `report.baseline` says whether it was saved; one not saved is a failed check.
    When a host cannot be asked (exit 3/4), the error carries a warning saying what became of the baseline."""
    baseline = load_baseline(dep) if since_baseline else None
    saved: BaselineRecord | None = None
    try:
        if record:
            dep.connect_all()  # a host that cannot be asked stops here, before any read: nothing recorded
            saved = record_baseline(dep)
        return final_health(dep, baseline=baseline, layers=layers, recorded=saved)
    except PdctlError as e:
        if record:
            e.warnings = (*e.warnings, baseline_warning(dep, saved))
        raise


def final_health(
    dep: Deployment,
    *,
    baseline: TransferBaseline | None = None,
    layers: tuple[str, ...] = DEFAULT_LAYERS,
    recorded: BaselineRecord | None = None,
) -> HealthReport:
    """Run the asked layers; independent ones in parallel. Never raises for an unhealthy deployment; raises
    UnreachableError/HostKeyRefused when a host cannot be asked at all. `recorded`: what --record-baseline did,
    in the report before its failures are counted (the progress line and the screen count the same checks)."""
    report = HealthReport(inventory=dep.inv.name, baseline=recorded)
    started = time.monotonic()
    dep.progress.emit(Event("step", "final-health"))
    try:
        _run_layers(dep, report, baseline, layers)
    except BaseException as e:
        dep.progress.emit(
            Event(
                "failed",
                "final-health",
                time.monotonic() - started,
                detail=str(e).splitlines()[0] if str(e) else type(e).__name__,
            )
        )
        raise
    elapsed = time.monotonic() - started
    failed = report.failures()
    dep.progress.emit(
        Event("done", "final-health", elapsed)
        if not failed
        else Event("failed", "final-health", elapsed, detail=f"{len(failed)} check(s) failed")
    )
    return report


def _run_layers(
    dep: Deployment, report: HealthReport, baseline: TransferBaseline | None, layers: tuple[str, ...]
) -> None:
    """The concurrent layers started together beside a reach of every host, judged in layer order; then the
    sequential ones, in layer order. Fills `report.layers`."""
    from pdctl.ops.fanout import DaemonPool

    started = time.monotonic()
    asked = [d for d in LAYER_DEFS if d.name in layers]
    # daemon threads: an interrupt stops the wait at once, not after the slowest probe (DaemonPool says why)
    with DaemonPool(2 * len(LAYER_DEFS)) as pool:
        g = Gathering(dep, pool, baseline)
        # every host reached (a remote `true`) beside the layers rather than before them; its failure is still
        # what the command says: it is waited for first
        reach = pool.submit(dep.connect_all)
        judges: dict[str, Judge] = {d.name: d.start(g) for d in asked if d.start is not None}
        reach.result()
        _show_waiting(dep, g.waiting, started)
        for name, judge in judges.items():
            report.layers[name] = judge()
    for d in asked:
        if d.run is None:
            continue
        try:
            report.layers[d.name] = d.run(g)
        except PdctlError as e:  # nothing could be judged (exit 3, as verify inflight): the layers judged are said
            if report.layers:
                e.warnings = (
                    *e.warnings,
                    f"final-health stopped at the {d.name} layer; judged before it: {_layers_so_far(report)}",
                )
            raise


def _layers_so_far(report: HealthReport) -> str:
    """'health FAIL (4 of 4 checks failed), e2e pass': each layer's verdict so far. Pure."""

    def verdict(results: list[CheckResult]) -> str:
        failed = sum(r.failed for r in results)
        return f"FAIL ({failed} of {len(results)} checks failed)" if failed else "pass"

    return ", ".join(f"{name} {verdict(rs)}" for name, rs in report.layers.items())


def _show_waiting(dep: Deployment, futs: dict[str, Future[list[CheckResult]]], started: float) -> None:
    """Say what final-health still waits for (typically the end-to-end probe of a hung pair), once a second."""
    from concurrent.futures import wait

    probe_limit = dep.inv.final_health.probe.timeout
    pending = set(futs.values())
    while pending:
        _done, pending = wait(pending, timeout=1.0)
        if pending:
            names = [n for n, f in futs.items() if f in pending]
            limit = probe_limit if "e2e" in names else dep.inv.final_health.health_timeout
            dep.progress.waiting(f"final-health layer(s) {', '.join(names)}", time.monotonic() - started, limit)
