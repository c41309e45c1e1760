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
from pdctl.checks.layers import DEFAULT_LAYERS, LAYER_NAMES
from pdctl.checks.result import CheckResult, Status
from pdctl.checks.router import judge_router_workers, title_rewritten
from pdctl.errors import PdctlError, RefusedError, UnreachableError
from pdctl.ops.context import Deployment
from pdctl.ops.fanout import raise_first_unreachable
from pdctl.ops.lineage_record import LINEAGE_WINDOW_S, host_lineage_path, load_lineage_record  # noqa: F401 (callers)
from pdctl.progress import Event
from pdctl.services.base import ServiceStatus



@dataclass
class HealthReport:
    inventory: str
    layers: dict[str, list[CheckResult]] = field(default_factory=dict)
    json_extra = ("ok",)

    @property
    def ok(self) -> bool:
        return not any(r.failed for rs in self.layers.values() for r in rs)

    def failures(self) -> list[CheckResult]:
        return [r for rs in self.layers.values() for r in rs if r.failed]


def health_probes(dep: Deployment, role: str, i: int) -> list[CheckResult]:
    """One instance's health checks: GET /health, and a router's /readiness with every declared worker."""
    from pdctl.checks.health import probe_health, probe_router_ready

    timeout = dep.inv.final_health.health_timeout
    base = dep.base_url(role, i)
    out = [probe_health(base, "/health", timeout)]
    if role == "router":
        workers = len(dep.inv.roles.prefill) + len(dep.inv.roles.decode)
        out.append(probe_router_ready(base, timeout=timeout, expect_workers=workers))
    return out


def _health_layer(dep: Deployment) -> list[CheckResult]:
    return _labelled(dep.each_instance(lambda role, i: health_probes(dep, role, i)))


def _e2e_layer(dep: Deployment) -> list[CheckResult]:
    from pdctl.checks.e2e import probe_chat

    p = dep.inv.final_health.probe
    model = p.model or dep.inv.served_model_name

    def one(role: str, i: int) -> list[CheckResult]:
        return [probe_chat(dep.base_url(role, i), model=model, prompt=p.prompt, max_tokens=p.max_tokens,
                           timeout=p.timeout)]

    return _labelled(dep.each_instance(one, roles=("router",)))


def read_transfer_counters(dep: Deployment) -> dict[str, Any]:
    """label -> MetricSet (or the exception that stopped us reading it), for every prefill and decode."""
    from pdctl.checks.metric_names import FAILURE_COUNTERS
    from pdctl.checks.sampling import fetch_metrics

    def one(role: str, i: int):
        try:
            return fetch_metrics(dep.base_url(role, i), timeout=dep.inv.final_health.metrics_timeout,
                                 families=FAILURE_COUNTERS)
        except Exception as e:  # reported as a failed check, never swallowed
            return e

    return {r.label: r.value for r in dep.each_instance(one, roles=("prefill", "decode"))}


def transfer_baseline(dep: Deployment) -> dict[str, dict[str, float]]:
    """The current failure counters per worker, to compare against later (`--since-baseline`)."""
    from pdctl.checks.transfer import counters_of

    return {label: counters_of(m) for label, m in read_transfer_counters(dep).items() if not isinstance(m, Exception)}


def baseline_path(dep: Deployment):
    return state.state_dir() / f"baseline-{dep.inv.name}.json"


def load_baseline(dep: Deployment) -> dict[str, dict[str, float]]:
    """The failure counters recorded by `record_baseline`. Raises UsageError when none was recorded."""
    from pdctl.errors import UsageError

    path = baseline_path(dep)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        raise UsageError(f"no transfer baseline recorded for {dep.inv.name!r} (looked in {path})",
                         hint="record one first: pdctl verify final-health --record-baseline") from None


def record_baseline(dep: Deployment) -> dict[str, dict[str, float]]:
    """Save the current failure counters of every worker as the baseline for later `since_baseline` checks."""
    snap = transfer_baseline(dep)
    baseline_path(dep).write_text(json.dumps(snap))
    return snap


def final_health_with_baseline(dep: Deployment, *, since_baseline: bool, record: bool,
                               layers: tuple[str, ...] = DEFAULT_LAYERS) -> "HealthReport":
    """final-health that compares transfer failures with the recorded baseline (`since_baseline`), then saves
    the counters as the new baseline (`record`), in that order."""
    baseline = load_baseline(dep) if since_baseline else None
    if record:
        record_baseline(dep)
    return final_health(dep, baseline=baseline, layers=layers)


def _transfer_layer(dep: Deployment, baseline: dict[str, dict[str, float]] | None) -> list[CheckResult]:
    from pdctl.checks.transfer import judge_transfer

    results: list[CheckResult] = []
    for label, m in read_transfer_counters(dep).items():
        if isinstance(m, Exception):
            hint = getattr(m, "hint", None)
            results.append(CheckResult("transfer", label, "/metrics", Status.FAIL, observed=str(m).splitlines()[0],
                                       detail="could not read metrics" + (f"; {hint}" if hint else "")))
            continue
        results.extend(judge_transfer(label, m, baseline.get(label) if baseline is not None else None))
    return results


def _observe_host(dep: Deployment, host: str) -> dict[tuple[str, int], tuple]:
    """(role, index) -> (ServiceStatus, ProcessInfo|None) of the roles on `host`, in one remote command. Raises
    UnreachableError/RefusedError when the host cannot be asked (fan_out keeps it as the host's error)."""
    names = {dep.inv.service_name(role, i): (role, i) for role, i, inst in dep.inv.instances() if inst.host == host}
    try:
        seen = dep.services(host).observe(list(names))
    except (UnreachableError, RefusedError):
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
    return {dep.inv.label(role, i): (role, i, *found[(role, i)]) for role, i, _ in dep.inv.instances()
            if (role, i) in found}


def live_processes_reached(dep: Deployment) -> tuple[dict[str, Any], dict[str, PdctlError]]:
    """live_processes of the hosts that answered, and host -> the error of each host that could not be asked:
    its roles are left out (unknown, never "no live main process"). For `pdctl watch`, which watches the rest."""
    results = dep.each_host(lambda host: _observe_host(dep, host))
    return _by_label(dep, results), {r.label: r.error for r in results if not r.reached}


def _flags_layer(dep: Deployment, procs: dict[str, Any]) -> list[CheckResult]:
    from pdctl.checks.flags import judge_flags, judge_undeclared

    results = []
    for label, (role, i, st, info) in procs.items():
        if info is None:
            results.append(CheckResult("flags", label, "main process", Status.FAIL,
                                       observed=st.detail or "not running", expected="running",
                                       detail=f"service {dep.inv.service_name(role, i)} has no live main process"))
            continue
        if role == "router" and title_rewritten(info.argv):
            results.extend(judge_flags(label, info.argv, info.env, {}, launch.declared_env(dep.inv, role, i)))
            results.extend(_router_workers(dep, i, label))
            continue
        results.extend(judge_flags(label, info.argv, info.env,
                                   launch.declared_flags(dep.inv, role, i), launch.declared_env(dep.inv, role, i)))
        results.extend(judge_undeclared(label, info.argv, launch.role_argv(dep.inv, role, i)))
    return results + _versions(dep, procs)


def _versions(dep: Deployment, procs: dict[str, Any]) -> list[CheckResult]:
    """One row per live worker: the version its /server_info reports (workers in parallel; no row when none)."""
    from pdctl.checks.flags import judge_version
    from pdctl.checks.http_util import client
    from pdctl.http_client import HTTPError
    from pdctl.ops.fanout import fan_out

    def server_info(key: tuple[str, int]) -> Any:
        try:
            with client(dep.inv.final_health.health_timeout) as c:
                return c.get(f"{dep.base_url(*key)}/server_info").json()
        except (HTTPError, ValueError):
            return None

    workers = [(label, (role, i)) for label, (role, i, _st, info) in procs.items() if role != "router" and info]
    rows = [judge_version(r.label, r.value) for r in fan_out(workers, server_info)]
    return [row for row in rows if row is not None]


def _router_workers(dep: Deployment, index: int, label: str) -> list[CheckResult]:
    """The router hides its argv; check the workers it routes to instead."""
    from pdctl.checks.http_util import client
    from pdctl.http_client import HTTPError

    host = dep.instance("router", index).host
    try:
        with client(dep.inv.final_health.health_timeout) as c:
            body = c.get(f"{dep.base_url('router', index)}/workers").json()
    except (HTTPError, ValueError):
        body = None
    prefill = [(launch.worker_url(dep.inv, "prefill", i, host), dep.inv.bootstrap_port(p))
               for i, p in enumerate(dep.inv.roles.prefill)]
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

    return {label: UnitRestarts(role, unit_name(st.name), st.restarts, st.main_pid, st.started_at)
            for label, (role, _i, st, _info) in procs.items() if st.active and st.restarts is not None}


def _lineage_layer(dep: Deployment, procs: dict[str, Any]) -> list[CheckResult]:
    from pdctl.checks.lineage import judge_lineage
    from pdctl.checks.systemd_restarts import judge_systemd_restarts

    return judge_lineage(lineage_snapshot(procs), load_lineage_record(dep), LINEAGE_WINDOW_S) + \
        judge_systemd_restarts(unit_restarts(procs))


def final_health(dep: Deployment, *, baseline: dict[str, dict[str, float]] | None = None,
                 layers: tuple[str, ...] = DEFAULT_LAYERS) -> HealthReport:
    """Run the asked layers; independent ones in parallel. Never raises for an unhealthy deployment; raises
    UnreachableError/HostKeyRefused when a host cannot be asked at all."""
    report = HealthReport(inventory=dep.inv.name)
    dep.connect_all()
    started = time.monotonic()
    dep.progress.emit(Event("step", "final-health"))
    try:
        _run_layers(dep, report, baseline, layers)
    except BaseException as e:
        dep.progress.emit(Event("failed", "final-health", time.monotonic() - started,
                                detail=str(e).splitlines()[0] if str(e) else type(e).__name__))
        raise
    elapsed = time.monotonic() - started
    failed = report.failures()
    dep.progress.emit(Event("done", "final-health", elapsed) if not failed else
                      Event("failed", "final-health", elapsed, detail=f"{len(failed)} check(s) failed"))
    return report


def _run_layers(dep: Deployment, report: HealthReport, baseline, layers: tuple[str, ...]) -> None:
    started = time.monotonic()
    from pdctl.ops.fanout import DaemonPool

    # daemon threads: an interrupt stops the wait at once, not after the slowest probe (DaemonPool says why)
    with DaemonPool(4) as ex:
        futs = {}
        if "health" in layers:
            futs["health"] = ex.submit(_health_layer, dep)
        if "e2e" in layers:
            futs["e2e"] = ex.submit(_e2e_layer, dep)
        if "transfer" in layers:
            futs["transfer"] = ex.submit(_transfer_layer, dep, baseline)
        procs_f = ex.submit(live_processes, dep) if {"flags", "lineage"} & set(layers) else None
        _show_waiting(dep, futs, started)
        for name in LAYER_NAMES:
            if name in futs:
                report.layers[name] = futs[name].result()
        if procs_f is not None:
            procs = procs_f.result()
            if "flags" in layers:
                report.layers["flags"] = _flags_layer(dep, procs)
            if "lineage" in layers:
                report.layers["lineage"] = _lineage_layer(dep, procs)
    if "inflight" in layers:
        from pdctl.ops.inflight import inflight_layer

        report.layers["inflight"] = inflight_layer(dep)
    if "pairs" in layers:   # after the others: its canaries would otherwise show in the inflight window
        from pdctl.ops.pairs import pairs_layer

        report.layers["pairs"] = pairs_layer(dep)


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
