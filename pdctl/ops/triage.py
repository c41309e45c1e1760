"""`pdctl triage`: the seeds' stall decision path as one command. Gathers; the judge is pdctl.checks.triage.

Gather (bounded, read-only): the service manager's view of every role; the PD gauges, failure counters and decode
progress sampled over a short window with no traffic of ours; then final-health's health, e2e, transfer and lineage
layers; then one more sample (so the probe's transfer, failed or not, is in the counters' delta); GPU utilisation of
each decode host via nvidia-smi when the host has it. Exit 0 healthy, 1 when a finding needs action.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from pdctl.checks.gpu import NVIDIA_SMI_UTILISATION, parse_gpu_util
from pdctl.checks.triage_outputs import OutputsSummary
from pdctl.checks.triage import (
    FINAL_HEALTH_LAYERS,
    Finding,
    InflightSummary,
    Observation,
    ServiceState,
    TriageObservations,
    judge_triage,
    observation_rows,
    unobserved_lines,
)
from pdctl.errors import RefusedError, UnreachableError
from pdctl.ops.context import Deployment, lock_holder
from pdctl.ops.defaults import TRIAGE_INTERVAL_S, TRIAGE_WINDOW_S
from pdctl.serialize import JSON_OFF

#: the words `pdctl triage` ends with; TriageReport.headline builds the line from them
HEALTHY = "HEALTHY"
ACTION_NEEDED = "ACTION NEEDED"
WARNINGS = "WARNINGS"
INTERRUPTED = "INTERRUPTED"


@dataclass
class TriageReport:
    inventory: str
    observations: list[Observation]
    findings: list[Finding]
    facts: TriageObservations = field(default_factory=TriageObservations)
    partial: bool = False
    interrupted_by: str = field(default="", metadata=JSON_OFF)  # the signal that stopped it ("": Ctrl-C or none)
    json_extra = ("ok", "headline")

    @property
    def ok(self) -> bool:
        return not self.partial and not self.needs_action  # a partial report found nothing only so far

    @property
    def needs_action(self) -> bool:
        return any(f.severity == "action" for f in self.findings)

    @property
    def headline(self) -> str:
        """The verdict line `pdctl triage` ends with, canonical for every renderer (the playbook's triage step too):
        'triage: HEALTHY: no finding needs action', 'triage: ACTION NEEDED (2 finding(s))',
        'triage: WARNINGS (1 finding(s))' or 'triage: INTERRUPTED (partial)'. Pure."""
        if self.partial:
            return f"triage: {INTERRUPTED} (partial)"
        if not self.findings:
            return f"triage: {HEALTHY}: no finding needs action"
        word = ACTION_NEEDED if self.needs_action else WARNINGS
        return f"triage: {word} ({len(self.findings)} finding(s))"

    def exit_code(self) -> int:
        if self.partial:
            return 130
        return 1 if self.needs_action else 0


def gpu_utilisation(dep: Deployment, host: str) -> list[float] | None:
    """GPU utilisation of a host, or None when it has no nvidia-smi or it could not be asked (never an error)."""
    cmd = f"command -v nvidia-smi >/dev/null 2>&1 && {NVIDIA_SMI_UTILISATION}"
    try:
        r = dep.transport(host).run(f"sh -c {shlex.quote(cmd)}", timeout=15)
    except Exception:
        return None
    if not r.ok:
        return None
    return parse_gpu_util(r.stdout) or None


def service_states(dep: Deployment) -> dict[str, ServiceState]:
    """The service manager's view of every role instance, read in parallel. A host that cannot be asked raises
    (UnreachableError exit 3, RefusedError exit 4), as the rest of triage does; any other failure to read a status
    gives active None (unknown: never judged as stopped)."""
    from pdctl.ops.fanout import raise_first_unreachable

    def one(role: str, i: int) -> ServiceState:
        service = dep.inv.service_name(role, i)
        try:
            st = dep.status(role, i)
        except (UnreachableError, RefusedError):
            raise
        except Exception as e:
            msg = getattr(e, "message", None) or str(e) or type(e).__name__
            return ServiceState(role, i, service, None, None, f"status not read: {msg.splitlines()[0]}")
        return ServiceState(role, i, service, bool(st.active), st.main_pid, st.detail or "")

    results = dep.each_instance(one)
    raise_first_unreachable(results)
    return {r.label: r.value for r in results if r.value is not None}


def triage(
    dep: Deployment, *, window_s: float = TRIAGE_WINDOW_S, interval_s: float = TRIAGE_INTERVAL_S, outputs: bool = False
) -> TriageReport:
    """Gather and judge. Read-only (the e2e probe is one short completion). Never raises for an unhealthy
    deployment; Ctrl-C returns what was gathered, marked partial. Raises UnreachableError / RefusedError when a
    host cannot be asked at all, or when no running worker answers /metrics, before any window (never "no
    finding")."""
    from pdctl.ops import inflight as inflight_ops

    try:
        return _triage(dep, window_s, interval_s, inflight_ops, outputs)
    except (UnreachableError, RefusedError) as e:
        # a host that cannot be asked mid-restart: the error says the restart. Not asked again when the lock's
        # own host is the one that did not answer (that would wait a second connect timeout for nothing).
        if getattr(e, "target", None) != _lock_host(dep):
            holder = lock_holder(dep)  # never raises: advisory
            if holder:
                e.warnings = (
                    *e.warnings,
                    f"the deployment lock is held by {holder}: a change is under way and "
                    "may explain this; run `pdctl triage` again when it ends",
                )
        raise


def _lock_host(dep: Deployment) -> str | None:
    """The host the deployment lock lives on (ops.context.deployment_lock), None when the inventory has none."""
    try:
        return dep.inv.roles.prefill[0].host
    except (AttributeError, IndexError):
        return None


def _triage(dep: Deployment, window_s: float, interval_s: float, inflight_ops, outputs: bool) -> TriageReport:
    from pdctl.ops import verify

    services = service_states(dep)  # a stopped role explains every refused connection to it
    stopped = {label for label, sv in services.items() if sv.active is False}
    workers = [label for label, sv in services.items() if sv.role in ("prefill", "decode")]
    # the inflight window first, with no traffic of ours (our own probe would read as progress); not when no worker
    # runs at all (nothing to sample)
    if workers and all(label in stopped for label in workers):
        inf = inflight_ops.InflightReport(
            window_s, interval_s, [], None, notes=["not sampled: no prefill or decode process is running"]
        )
    else:
        inf = inflight_ops.sample_inflight(
            dep, window_s, interval_s, what="triage samples", preflight=True, explained=frozenset(stopped)
        )  # a stopped role's silence is a finding
    partial, fh, fh_error = inf.partial, None, None
    if not partial:
        try:
            fh = verify.final_health(dep, layers=FINAL_HEALTH_LAYERS)
            inf.points.append(inflight_ops.read_point(dep, inf.t0))
        except KeyboardInterrupt as e:
            partial, inf.interrupted_by = True, getattr(e, "signal_name", "")
        except (UnreachableError, RefusedError):
            raise
        except Exception as e:  # an "unobserved" finding and an observation row, never swallowed silently
            fh_error = e
    gpu = {r.label: r.value for r in dep.each_host(lambda h: gpu_utilisation(dep, h), roles=("decode",))}
    holder = lock_holder(dep)  # after the reads: a change that began while triage looked counts too

    obs = TriageObservations(
        window_s=window_s,
        services=services,
        gpu_util=gpu,
        lock_holder=holder,
        unobserved=unobserved_lines(inf.points, inf.verdict is not None, fh_error, stopped=stopped),
    )
    if fh is not None:
        obs.take_final_health(fh.layers)
    if outputs and not partial and not stopped:  # last: its load would show in every reading above
        obs.outputs = outputs_summary(dep)
    _counters_into(obs, inf, window_s, interval_s)
    if inf.verdict is not None:
        obs.inflight = InflightSummary(
            inf.verdict.verdict,
            inf.verdict.conclusive,
            inf.verdict.summary,
            inf.holders(),
            pinned_by=inf.verdict.pinned_by,
        )
    return TriageReport(
        dep.inv.name,
        observation_rows(obs, fh_error),
        judge_triage(obs),
        facts=obs,
        partial=partial,
        interrupted_by=inf.interrupted_by,
    )


def outputs_summary(dep: Deployment) -> OutputsSummary:
    """Run `verify outputs` with its defaults and keep what triage judges."""
    from pdctl.checks.outputs import CORRUPT, LATE, PASS
    from pdctl.ops.outputs import overlap_on_decodes, verify_outputs

    rep = verify_outputs(dep)
    judged = [x for x in rep.sessions if x.status in (PASS, LATE, CORRUPT)]
    corrupt = [x for x in judged if x.status == CORRUPT]
    return OutputsSummary(
        concurrency=rep.settings.sessions,
        judged=len(judged),
        corrupt=len(corrupt),
        example=f"session {corrupt[0].session} turn {corrupt[0].turn}: {corrupt[0].found}" if corrupt else "",
        pd_status=rep.pd_use.status,
        pd_found=rep.pd_use.found,
        overlap_on=overlap_on_decodes(dep),
    )


def _good(inf) -> list:
    return [p for p in inf.points if p.complete]


def _counters_into(obs: TriageObservations, inf, window_s: float, interval_s: float) -> None:
    """Failure counters and their deltas over the samples; decode progress over the quiet window only (the probe's
    own tokens come after it)."""
    good = _good(inf)
    if not good:
        return
    first, last = good[0], good[-1]
    obs.transfer_failed = {k: c.get("transfer_failed", 0.0) for k, c in last.counters.items()}
    obs.bootstrap_failed = {k: c.get("bootstrap_failed", 0.0) for k, c in last.counters.items()}
    obs.transfer_failed_delta = counter_delta(first.counters, last.counters, "transfer_failed")
    obs.bootstrap_failed_delta = counter_delta(first.counters, last.counters, "bootstrap_failed")
    if inf.verdict is not None and inf.verdict.generation_tokens_delta is not None:
        obs.generation_tokens_delta = inf.verdict.generation_tokens_delta
    window_pts = [p for p in good if p.t <= window_s + interval_s]
    obs.gen_throughput = (window_pts or good)[-1].gen_throughput


def counter_delta(first: dict[str, dict[str, float]], last: dict[str, dict[str, float]], key: str) -> float:
    """How much a counter grew between two samples, summed over workers; a worker whose counter went down (its
    process restarted) or is new counts its whole value. Pure."""
    total = 0.0
    for label, c in last.items():
        before = first.get(label, {}).get(key)
        now = c.get(key, 0.0)
        total += now if before is None or now < before else now - before
    return total
