"""`verify final-health`: the seed's closing check as layers, independent probes run in parallel.

Layers: health (every role), e2e (a chat completion through each router, content checked), transfer
(transfer_failed and bootstrap_failed are 0, or not increased since a baseline), flags (live cmdline/env of each
main process against the inventory), lineage (a decode/router restarted alone after its prefill, by an operator or
by systemd on its own), and optionally
inflight (issue 4's verdict over a window) and pairs (a canary for every prefill x decode pair, ops/pairs.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from pdctl import launch, state
from pdctl.checks.baseline import BaselineRecord
from pdctl.ops.baseline import baseline_warning, load_baseline, read_transfer_counters, record_baseline
from pdctl.checks.layers import DEFAULT_LAYERS, LAYER_NAMES
from pdctl.checks.result import CheckResult, Status
from pdctl.checks.router import judge_router_env, judge_router_workers, title_rewritten
from pdctl.errors import PdctlError, RefusedError, UnreachableError, UsageError
from pdctl.engines import engine_kind
from pdctl.ops.context import Deployment
from pdctl.ops.fanout import raise_first_unreachable
from pdctl.ops.lineage_record import LINEAGE_WINDOW_S, host_lineage_path, load_lineage_record  # noqa: F401 (callers)
from pdctl.progress import Event
from pdctl.services.base import ServiceStatus


@dataclass
class HealthReport:
    inventory: str
    layers: dict[str, list[CheckResult]] = field(default_factory=dict)
    baseline: BaselineRecord | None = None  # what --record-baseline did (None: not asked)
    json_extra = ("ok",)
    json_omit_empty = ("baseline",)

    @property
    def ok(self) -> bool:
        return not self.failures()

    def failures(self) -> list[CheckResult]:
        """Every failed check of every layer, then a baseline that was asked for and not recorded."""
        baseline = self.baseline.checks() if self.baseline is not None else []
        return [r for rs in self.layers.values() for r in rs if r.failed] + baseline


def health_probes(dep: Deployment, role: str, i: int) -> list[CheckResult]:
    """One instance's health checks: GET /health, and a router's /readiness with every declared worker."""
    from pdctl.checks.health import probe_health, probe_router_ready

    timeout = dep.inv.final_health.health_timeout
    base = dep.base_url(role, i)
    out = [probe_health(base, "/health", timeout)]
    if role == "router":
        workers = len(dep.inv.roles.prefill) + len(dep.inv.roles.decode)
        out.append(probe_router_ready(base, timeout=timeout, expect_workers=workers))
        if out[0].status is Status.PASS:  # a router that does not answer has said all there is
            from pdctl.ops.router_verdicts import router_verdicts

            out.extend(router_verdicts(dep, i))
    return out


def _health_layer(dep: Deployment) -> list[CheckResult]:
    return _labelled(dep.each_instance(lambda role, i: health_probes(dep, role, i)))


def _e2e_layer(dep: Deployment) -> list[CheckResult]:
    from pdctl.checks.e2e import probe_chat

    p = dep.inv.final_health.probe
    model = p.model or dep.inv.served_model_name
    repeats = engine_kind(dep.inv.engine).repeats_token_on_failed_transfer

    def one(role: str, i: int) -> list[CheckResult]:
        return [
            probe_chat(
                dep.base_url(role, i),
                model=model,
                prompt=p.prompt,
                max_tokens=p.max_tokens,
                timeout=p.timeout,
                repeats_on_failure=repeats,
            )
        ]

    return _labelled(dep.each_instance(one, roles=("router",)))


def final_health_with_baseline(
    dep: Deployment, *, since_baseline: bool, record: bool, layers: tuple[str, ...] = DEFAULT_LAYERS
) -> "HealthReport":
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


def _transfer_layer(dep: Deployment, baseline: dict[str, dict[str, float]] | None) -> list[CheckResult]:
    from pdctl.checks.transfer import judge_transfer

    results: list[CheckResult] = []
    for label, m in read_transfer_counters(dep).items():
        if isinstance(m, Exception):
            hint = getattr(m, "hint", None)
            results.append(
                CheckResult(
                    "transfer",
                    label,
                    "/metrics",
                    Status.FAIL,
                    observed=str(m).splitlines()[0],
                    detail="could not read metrics" + (f"; {hint}" if hint else ""),
                )
            )
            continue
        results.extend(judge_transfer(label, m, baseline.get(label) if baseline is not None else None))
    return results


def _observe_host(dep: Deployment, host: str) -> dict[tuple[str, int], tuple]:
    """(role, index) -> (ServiceStatus, ProcessInfo|None) of the roles on `host`, in one remote command. Raises
    UnreachableError/RefusedError when the host cannot be asked (fan_out keeps it as the host's error)."""
    names = {dep.inv.service_name(role, i): (role, i) for role, i, inst in dep.inv.instances() if inst.host == host}
    try:
        seen = dep.services(host).observe(list(names))
    except (UnreachableError, RefusedError, UsageError):  # not asked, or never can be (a key file missing)
        raise
    except PdctlError as e:  # the host answered, the read failed: shown for its roles, the others stand
        down = e.message.splitlines()[0]
        return {key: (ServiceStatus(name, False, None, None, detail=down), None) for name, key in names.items()}
    return {key: seen[name] for name, key in names.items()}


def live_processes(dep: Deployment) -> dict[str, Any]:
    """label -> (role, index, ServiceStatus, ProcessInfo|None) for every role instance: each host's services and
    their processes read in ONE remote command per host (`ServiceManager.observe`), hosts in parallel.

    Raises the first UnreachableError/RefusedError (exit 3/4, e.g. "unknown: gpu1 did not answer within 20 s")
    once every host was asked: a host that could not be asked says nothing about its processes, so it is
    never reported as "no live main process" (nor counted in a lineage record)."""
    results = dep.each_host(lambda host: _observe_host(dep, host))
    raise_first_unreachable(results)
    return _by_label(dep, results)


def _by_label(dep: Deployment, results) -> dict[str, Any]:
    found = {key: value for r in results if r.reached for key, value in r.value.items()}
    return {
        dep.inv.label(role, i): (role, i, *found[(role, i)]) for role, i, _ in dep.inv.instances() if (role, i) in found
    }


def live_processes_reached(dep: Deployment) -> tuple[dict[str, Any], dict[str, PdctlError]]:
    """live_processes of the hosts that answered, and host -> the error of each host that could not be asked:
    its roles are left out (unknown, never "no live main process"). For `pdctl watch`, which watches the rest."""
    results = dep.each_host(lambda host: _observe_host(dep, host))
    return _by_label(dep, results), {r.label: r.error for r in results if not r.reached}


def _flags_layer(dep: Deployment, procs: dict[str, Any], infos: dict[tuple[str, int], Any]) -> list[CheckResult]:
    from pdctl.checks.flags import judge_flags, judge_undeclared

    results = []
    for label, (role, i, st, info) in procs.items():
        if info is None:
            results.append(
                CheckResult(
                    "flags",
                    label,
                    "main process",
                    Status.FAIL,
                    observed=st.detail or "not running",
                    expected="running",
                    detail=f"service {dep.inv.service_name(role, i)} has no live main process",
                )
            )
            continue
        if role == "router" and title_rewritten(info.argv):
            results.extend(judge_router_env(label, info.env, launch.declared_env(dep.inv, role, i)))
            results.extend(_router_workers(dep, i, label))
            continue
        results.extend(
            judge_flags(
                label,
                info.argv,
                info.env,
                launch.declared_flags(dep.inv, role, i),
                launch.declared_env(dep.inv, role, i),
            )
        )
        results.extend(judge_undeclared(label, info.argv, launch.role_argv(dep.inv, role, i)))
    return results + _versions(procs, infos)


def server_infos(dep: Deployment, only: set[tuple[str, int]] | None = None) -> dict[tuple[str, int], Any]:
    """Each worker's /server_info (of `only` when given; None where it does not answer), asked in parallel.
    final-health asks every worker while /proc is still being read, so the flags layer does not wait for these
    round trips after it; the watch asks the live ones it found."""
    from httpx import HTTPError

    from pdctl.checks.http_util import client

    def server_info(role: str, i: int) -> Any:
        if only is not None and (role, i) not in only:
            return None
        try:
            return (
                client().get(f"{dep.base_url(role, i)}/server_info", timeout=dep.inv.final_health.health_timeout).json()
            )
        except (HTTPError, ValueError):
            return None

    return {r.key: r.value for r in dep.each_instance(server_info, roles=("prefill", "decode"))}


def _versions(procs: dict[str, Any], infos: dict[tuple[str, int], Any]) -> list[CheckResult]:
    """One row per live worker: the version its /server_info reports (no row when none)."""
    from pdctl.checks.flags import judge_version

    rows = [
        judge_version(label, infos.get((role, i)))
        for label, (role, i, _st, info) in procs.items()
        if role != "router" and info
    ]
    return [row for row in rows if row is not None]


def _router_workers(dep: Deployment, index: int, label: str) -> list[CheckResult]:
    """The router hides its argv; check the workers it routes to instead."""
    from httpx import HTTPError

    from pdctl.checks.http_util import client

    host = dep.instance("router", index).host
    try:
        body = (
            client().get(f"{dep.base_url('router', index)}/workers", timeout=dep.inv.final_health.health_timeout).json()
        )
    except (HTTPError, ValueError):
        body = None
    prefill = [
        (launch.worker_url(dep.inv, "prefill", i, host), dep.inv.bootstrap_port(p))
        for i, p in enumerate(dep.inv.roles.prefill)
    ]
    decode = [launch.worker_url(dep.inv, "decode", i, host) for i in range(len(dep.inv.roles.decode))]
    return judge_router_workers(label, body, prefill, decode)


def lineage_snapshot(procs: dict[str, Any]) -> dict[str, Any]:
    """label -> (role, pid, start_epoch) of the live main processes."""
    return {label: (role, st.main_pid, st.started_at) for label, (role, _i, st, _info) in procs.items() if st.active}


def save_lineage_record(dep: Deployment, procs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Remember the pids and start times of a clean co-start, for the lineage layer of later checks, on the prefill
    host (shared by all operators) and locally."""
    from pdctl.checks.lineage import make_lineage_record

    record = make_lineage_record(lineage_snapshot(procs if procs is not None else live_processes(dep)))
    text = json.dumps(record, indent=1)
    host, path = host_lineage_path(dep)
    dep.transport(host).put_file(path, text)
    state.lineage_path(dep.inv.name).write_text(text)
    return record


def unit_restarts(procs: dict[str, Any]) -> dict[str, Any]:
    """label -> UnitRestarts of the running services whose manager counts its own restarts (systemd's NRestarts)."""
    from pdctl.checks.systemd_restarts import UnitRestarts
    from pdctl.services.systemd import unit_name

    return {
        label: UnitRestarts(role, unit_name(st.name), st.restarts, st.main_pid, st.started_at)
        for label, (role, _i, st, _info) in procs.items()
        if st.active and st.restarts is not None
    }


def _lineage_layer(dep: Deployment, procs: dict[str, Any], record: Any) -> list[CheckResult]:
    from pdctl.checks.lineage import judge_lineage
    from pdctl.checks.systemd_restarts import judge_systemd_restarts

    known = engine_kind(dep.inv.engine).hazard(dep.inv.transfer_backend)
    return judge_lineage(lineage_snapshot(procs), record, LINEAGE_WINDOW_S, known=known) + judge_systemd_restarts(
        unit_restarts(procs)
    )


def final_health(
    dep: Deployment,
    *,
    baseline: dict[str, dict[str, float]] | None = None,
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


def _run_layers(dep: Deployment, report: HealthReport, baseline, layers: tuple[str, ...]) -> None:
    started = time.monotonic()
    from pdctl.ops.fanout import DaemonPool

    # daemon threads: an interrupt stops the wait at once, not after the slowest probe (DaemonPool says why)
    with DaemonPool(7) as ex:
        # every host reached (a remote `true`) beside the layers rather than before them; its failure is still
        # what the command says: it is waited for first
        reach = ex.submit(dep.connect_all)
        futs = {}
        if "health" in layers:
            futs["health"] = ex.submit(_health_layer, dep)
        if "e2e" in layers:
            futs["e2e"] = ex.submit(_e2e_layer, dep)
        if "transfer" in layers:
            futs["transfer"] = ex.submit(_transfer_layer, dep, baseline)
        procs_f = ex.submit(live_processes, dep) if {"flags", "lineage"} & set(layers) else None
        # what flags and lineage read besides /proc, fetched beside it rather than after it
        infos_f = ex.submit(server_infos, dep) if "flags" in layers else None
        record_f = ex.submit(load_lineage_record, dep) if "lineage" in layers else None
        reach.result()
        _show_waiting(dep, futs, started)
        for name in LAYER_NAMES:
            if name in futs:
                report.layers[name] = futs[name].result()
        if procs_f is not None:
            procs = procs_f.result()
            if "flags" in layers:
                report.layers["flags"] = _flags_layer(dep, procs, infos_f.result())
            if "lineage" in layers:
                report.layers["lineage"] = _lineage_layer(dep, procs, record_f.result())
    if "inflight" in layers:
        from pdctl.ops.inflight import inflight_layer

        try:
            report.layers["inflight"] = inflight_layer(dep)
        except PdctlError as e:  # nothing could be sampled (exit 3, as verify inflight): the layers judged are said
            if report.layers:
                e.warnings = (
                    *e.warnings,
                    f"final-health stopped at the inflight layer; judged before it: {_layers_so_far(report)}",
                )
            raise
    if "pairs" in layers:  # after the others: its canaries would otherwise show in the inflight window
        from pdctl.ops.pairs import pairs_layer

        report.layers["pairs"] = pairs_layer(dep)


def _layers_so_far(report: HealthReport) -> str:
    """'health FAIL (4 of 4 checks failed), e2e pass': each layer's verdict so far. Pure."""

    def verdict(results: list[CheckResult]) -> str:
        failed = sum(r.failed for r in results)
        return f"FAIL ({failed} of {len(results)} checks failed)" if failed else "pass"

    return ", ".join(f"{name} {verdict(rs)}" for name, rs in report.layers.items())


def _show_waiting(dep: Deployment, futs: dict[str, Any], started: float) -> None:
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


def _labelled(results) -> list[CheckResult]:
    """The checks of every instance, each targeted at its instance's label, in inventory order. A host that could
    not be asked stops final-health (exit 3/4): its probes say nothing about the deployment."""
    raise_first_unreachable(results)
    out = []
    for r in results:
        for check in r.value:
            check.target = r.label
            out.append(check)
    return out
