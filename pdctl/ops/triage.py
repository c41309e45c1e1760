"""`pdctl triage`: the seeds' stall decision path as one command, with findings split into observed and inferred.

Gather (bounded, read-only): the PD gauges, failure counters and decode progress sampled over a short window with
no traffic of ours; then final-health's health, e2e, transfer and lineage layers; then one more sample (so the
probe's transfer, failed or not, is in the counters' delta); GPU utilisation of each decode host via
nvidia-smi over the host's transport when the host has it. Judge: `judge_triage(obs)` (pure) turns the observations
into findings, each with a recommended action. Exit 0 healthy, 1 when a finding needs action.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field
from typing import Any

from pdctl.checks.inflight import fmt_count, fmt_s
from pdctl.ops.context import Deployment
from pdctl.ops.defaults import TRIAGE_INTERVAL_S, TRIAGE_WINDOW_S

NVIDIA_SMI = "nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits"
PAIR_ACTION = "run `pdctl restart --pair` (prefill -> decode -> router, readiness-gated, verified)"
DEPLOY_ACTION = "run `pdctl deploy` (starts prefill -> decode -> router, readiness-gated, then final-health)"

#: the words `pdctl triage` ends with; TriageReport.headline builds the line from them
HEALTHY = "HEALTHY"
ACTION_NEEDED = "ACTION NEEDED"
WARNINGS = "WARNINGS"
INTERRUPTED = "INTERRUPTED"


@dataclass
class Finding:
    title: str
    severity: str                         # "action" (exit 1) or "warn"
    observed: list[str]
    inferred: list[str]
    action: str
    kind: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TriageReport:
    inventory: str
    observations: list[dict[str, Any]]
    findings: list[Finding]
    facts: dict[str, Any] = field(default_factory=dict)
    partial: bool = False

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

    def to_dict(self) -> dict[str, Any]:
        return {"inventory": self.inventory, "ok": not self.needs_action, "partial": self.partial,
                "headline": self.headline,
                "findings": [f.to_dict() for f in self.findings], "observations": self.observations,
                "facts": self.facts}


def parse_gpu_util(text: str) -> list[float]:
    """nvidia-smi's `utilization.gpu` csv (noheader, nounits): one percentage a line. Pure; skips junk lines."""
    out = []
    for line in text.splitlines():
        try:
            out.append(float(line.strip()))
        except ValueError:
            continue
    return out


def gpu_utilisation(dep: Deployment, host: str) -> list[float] | None:
    """GPU utilisation of a host, or None when it has no nvidia-smi (never an error)."""
    cmd = f"command -v nvidia-smi >/dev/null 2>&1 && {NVIDIA_SMI}"
    try:
        r = dep.transport(host).run(f"sh -c {shlex.quote(cmd)}", timeout=15)
    except Exception:
        return None
    if not r.ok:
        return None
    vals = parse_gpu_util(r.stdout)
    return vals or None


def _lineage_hazards(lineage: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in lineage if r.get("status") in ("fail", "warn") and (r.get("data") or {}).get("hazard")]


def judge_triage(obs: dict[str, Any]) -> list[Finding]:
    """Findings from the gathered observations. Pure. Keys of `obs` (all optional):
    health: [check dicts]; e2e: [check dicts]; lineage: [check dicts];
    inflight: {"verdict", "conclusive", "summary", "holders"}; transfer_failed / bootstrap_failed: {label: total};
    transfer_failed_delta / bootstrap_failed_delta: float over the window; generation_tokens_delta: float|None;
    gen_throughput: {label: value}; gpu_util: {host: [percent] | None}; window_s: float;
    unobserved: [str] -- what could not be read at all (a finding that needs action: "no finding" must mean
    "looked and saw nothing wrong", never "could not look");
    services: {label: {"role", "index", "service", "active": bool | None, "pid", "detail"}} -- the service manager's
    view. A role whose service is not active is a "not running" finding, and refused connections to it (health,
    the end-to-end probe) are explained by it: they are never read as KV transfer failures.
    """
    from pdctl.ops.inflight import short_gauges

    findings: list[Finding] = []
    health = obs.get("health") or []
    e2e = obs.get("e2e") or []
    lineage = obs.get("lineage") or []
    inf = obs.get("inflight") or {}
    tf_tot = sum((obs.get("transfer_failed") or {}).values())
    bf_tot = sum((obs.get("bootstrap_failed") or {}).values())
    tf_d = obs.get("transfer_failed_delta") or 0.0
    bf_d = obs.get("bootstrap_failed_delta") or 0.0
    window = obs.get("window_s")
    gen_d = obs.get("generation_tokens_delta")
    thr = obs.get("gen_throughput") or {}
    gpu = obs.get("gpu_util") or {}

    services = obs.get("services") or {}
    stopped = [label for label, sv in services.items() if sv.get("active") is False]
    down = [h for h in health if h.get("status") == "fail" and h.get("target") not in stopped]
    down_stopped = [h for h in health if h.get("status") == "fail" and h.get("target") in stopped]
    e2e_bad = [e for e in e2e if e.get("status") == "fail"]
    e2e_explained: list[dict[str, Any]] = []
    if stopped:     # a probe through a deployment with a stopped role fails for that reason: no transfer evidence
        e2e_explained, e2e_bad = e2e_bad, []
    hazards = _lineage_hazards(lineage)

    idle: list[str] = []
    if gen_d is not None:
        idle.append(f"decode generated {fmt_count(gen_d)} tokens over the "
                    f"{fmt_s(window) if window else '?'} window")
    if thr:
        idle.append("decode gen_throughput " + ", ".join(f"{k}={v:g} tok/s" for k, v in thr.items()))
    for host, vals in gpu.items():
        idle.append(f"GPU utilisation on {host}: " + (", ".join(f"{v:g}%" for v in vals) if vals else "not available"))

    if stopped:
        findings.append(not_running_finding(services, stopped, down_stopped, e2e_explained))

    if down:
        findings.append(Finding(
            "a component is not healthy", "action",
            [f"{h.get('target')} {h.get('name')}: {h.get('observed')}" for h in down],
            ["the process is down, starting, or its HTTP server is wedged"],
            "read `pdctl logs ROLE` and `pdctl status`; then `pdctl restart --pair` (a lone restart of prefill or "
            "decode leaves the pair's KV bootstrap degraded)", kind="health"))

    unobserved = obs.get("unobserved") or []
    if unobserved:
        findings.append(Finding(
            "could not observe " + ("the PD queues and counters" if any("/metrics" in u for u in unobserved)
                                    else "part of the deployment"), "action", list(unobserved),
            ["without these readings triage cannot tell a healthy deployment from a wedged one: the absence of "
             "other findings proves nothing"],
            "check that each worker answers /metrics (`pdctl status`, `pdctl logs ROLE`; SGLang needs "
            "--enable-metrics), then run `pdctl triage` again", kind="unobserved"))

    if inf.get("verdict") == "pinned":
        held = inf.get("holders") or {}
        obs_lines = [inf.get("summary", "inflight pinned")]
        obs_lines += [f"{k} holds {short_gauges(gs)}" for k, gs in held.items()]
        obs_lines += idle
        if not down and not stopped:
            obs_lines.append("every /health answered 200")
        sev = "action" if inf.get("conclusive", True) else "warn"
        findings.append(Finding(
            "requests pinned in the PD queues with decode idle (the seed's silent wedge)", sev, obs_lines,
            ["a KV transfer room is stuck (e.g. a Failed status overwritten to Transferring by a late chunk write, "
             "the seed's update_status race); it will not time out on its own",
             "a green /health says nothing here: it runs a fake-bootstrap generation that never moves KV"],
            "collect `pdctl logs prefill` and `pdctl logs decode` first, then " + PAIR_ACTION +
            "; confirm with `pdctl verify inflight`, and check the build carries the terminal-status fix",
            kind="pinned"))

    failing = tf_d > 0 or bf_d > 0 or bool(e2e_bad)
    fail_obs = []
    if tf_d or bf_d:
        fail_obs.append(f"transfer_failed +{fmt_count(tf_d)}, bootstrap_failed +{fmt_count(bf_d)} over the window "
                        f"(totals {fmt_count(tf_tot)} / {fmt_count(bf_tot)})")
    elif tf_tot or bf_tot:
        fail_obs.append(f"transfer_failed total {fmt_count(tf_tot)}, bootstrap_failed total {fmt_count(bf_tot)} "
                        "(no increase during the window)")
    for e in e2e_bad:
        fail_obs.append(f"end-to-end probe through {e.get('target')}: {e.get('observed')} ({e.get('detail', '')})")
    if not e2e_bad and not e2e_explained and e2e:
        fail_obs.append("end-to-end probe through the router: " + ", ".join(e.get("observed", "") for e in e2e))
    haz_obs = [f"{h.get('target')}: {h.get('observed')}" for h in hazards]

    if hazards and failing:
        findings.append(Finding(
            "KV transfers failing after a lone restart: the degraded-bootstrap hazard", "action",
            fail_obs + haz_obs + ([] if down or stopped else ["every /health answered 200"]),
            ["decode (or prefill) was restarted without its pair; the long-running prefill keeps stale NIXL peer "
             "state, so transfers to the new process fail silently (the seed's degraded bootstrap)"],
            PAIR_ACTION + "; then `pdctl verify final-health`", kind="degraded-bootstrap"))
    elif failing:
        findings.append(Finding(
            "KV transfers failing", "action", fail_obs,
            ["the pair cannot move KV for new requests; no restart-lineage hazard was seen, so read the logs for the "
             "failing rooms (bootstrap port reachable? decode/prefill restarted outside pdctl?)"],
            "read `pdctl logs prefill` / `pdctl logs decode`; if it persists, " + PAIR_ACTION, kind="transfer"))
    elif hazards:
        sev = "action" if any(h.get("status") == "fail" for h in hazards) else "warn"
        findings.append(Finding(
            "restart-lineage hazard (transfers not failing yet)", sev,
            haz_obs + (fail_obs or ["no transfer failure during the window"]),
            ["the pair was not co-restarted: the degraded-bootstrap hazard may surface as silent transfer failures"],
            PAIR_ACTION + " at the next safe moment", kind="lineage"))
    elif tf_tot or bf_tot:
        findings.append(Finding(
            "old transfer failures on the counters", "warn", fail_obs,
            ["failures happened earlier (e.g. aborted requests); none during this window"],
            "record a baseline (`pdctl verify final-health --record-baseline`) and watch `--since-baseline`",
            kind="transfer-history"))

    if inf.get("verdict") == "busy" and not failing:
        findings.append(Finding(
            "requests queued but progressing", "warn", [inf.get("summary", "busy")] + idle,
            ["normal work (e.g. a post-prefill room waiting for decode to pull its KV); counts are not request ids, "
             "so one pinned room under steady traffic would also read as busy"],
            "nothing now; if it persists without load, run `pdctl verify inflight --window 60`", kind="busy"))
    return findings


def short_label(label: str) -> str:
    """'prefill[0]' from 'prefill[0]@gpu1:30000'. Pure."""
    return label.split("@", 1)[0]


def not_running_finding(services: dict[str, dict[str, Any]], stopped: list[str], health_fails: list[dict[str, Any]],
                        e2e_fails: list[dict[str, Any]]) -> Finding:
    """The "not running" finding: which roles have no process, the probes that were refused because of it, and the
    action: `pdctl deploy` when nothing runs, else `pdctl restart --pair`. Pure."""
    everything = len(stopped) == len(services)
    observed = []
    for label in stopped:
        sv = services[label]
        what = f"service {sv['service']}" if sv.get("service") else "its service"
        observed.append(f"{label}: {what}: {sv.get('detail') or 'not running (no process)'}")
    refused = [f"{h.get('target')} {h.get('name')}: {h.get('observed')}" for h in health_fails]
    refused += [f"end-to-end probe through {e.get('target')}: {e.get('observed')}" for e in e2e_fails]
    if refused:
        observed.append("consistent with that: " + "; ".join(refused))
    roles = sorted({sv.get("role") or short_label(label).split("[")[0] for label, sv in services.items()
                    if label in stopped})
    if everything:
        inferred = ["the deployment is stopped (e.g. `pdctl down`, a reboot): refused connections to stopped servers "
                    "say nothing about KV transfers, so no transfer or queue finding is drawn from them"]
        action = DEPLOY_ACTION
    else:
        inferred = [f"{', '.join(short_label(s) for s in stopped)} stopped or exited while the rest runs on; requests "
                    "through the router fail for that reason, not because of KV transfers"]
        logs = " / ".join(f"`pdctl logs {r}`" for r in roles)
        action = f"read {logs} for why it stopped; then " + PAIR_ACTION + \
            " (a lone start of prefill or decode leaves the pair's KV bootstrap degraded)"
    return Finding(f"not running: {', '.join(short_label(s) for s in stopped)} (no process)", "action",
                   observed, inferred, action, kind="not-running")


def service_states(dep: Deployment) -> dict[str, dict[str, Any]]:
    """The service manager's view of every role instance (label -> role, index, service, active, pid, detail), read
    in parallel. A host that cannot be asked raises (UnreachableError exit 3, RefusedError exit 4), as the rest of
    triage does; any other failure to read a status gives active None (unknown: never judged as stopped)."""
    from concurrent.futures import ThreadPoolExecutor

    from pdctl.errors import RefusedError, UnreachableError

    def one(role: str, i: int) -> dict[str, Any]:
        row: dict[str, Any] = {"role": role, "index": i, "service": dep.inv.service_name(role, i)}
        try:
            st = dep.status(role, i)
        except (UnreachableError, RefusedError):
            raise
        except Exception as e:
            msg = getattr(e, "message", None) or str(e) or type(e).__name__
            return {**row, "active": None, "pid": None, "detail": f"status not read: {msg.splitlines()[0]}"}
        return {**row, "active": bool(st.active), "pid": st.main_pid, "detail": st.detail or ""}

    instances = list(dep.inv.instances())
    if not instances:
        return {}
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(instances)))) as ex:
        futs = {dep.inv.label(r, i): ex.submit(one, r, i) for r, i, _ in instances}
        return {label: f.result() for label, f in futs.items()}


def triage(dep: Deployment, *, window_s: float = TRIAGE_WINDOW_S, interval_s: float = TRIAGE_INTERVAL_S
           ) -> TriageReport:
    """Gather and judge. Read-only (the e2e probe is one short completion). Never raises for an unhealthy
    deployment; Ctrl-C returns what was gathered, marked partial."""
    from pdctl.errors import RefusedError, UnreachableError
    from pdctl.ops.inflight import read_point, sample_inflight
    from pdctl.ops.verify import final_health

    from pdctl.ops.inflight import InflightReport

    holder: dict[str, Any] = {}
    # 0. the service manager's view: a stopped role explains every refused connection to it
    services = service_states(dep)
    stopped = {label for label, sv in services.items() if sv["active"] is False}
    workers = [label for label, sv in services.items() if sv["role"] in ("prefill", "decode")]
    # 1. the inflight window first, with no traffic of ours (our own probe would read as progress); not when no
    #    worker runs at all (nothing to sample)
    if workers and all(label in stopped for label in workers):
        inf = InflightReport(window_s, interval_s, [], None,
                             notes=["not sampled: no prefill or decode process is running"])
    else:
        inf = sample_inflight(dep, window_s, interval_s, what="triage samples")
    partial = inf.partial
    # 2. health, e2e probe, transfer counters, lineage; 3. one more sample so the probe's transfer is in the deltas
    if not partial:
        try:
            holder["fh"] = final_health(dep, layers=("health", "e2e", "transfer", "lineage"))
            inf.points.append(read_point(dep, inf.t0))
        except KeyboardInterrupt:
            partial = True
        except (UnreachableError, RefusedError):
            raise   # a host could not be asked at all (exit 3) or refused (host key, exit 4): never "no finding"
        except Exception as e:  # reported as an observation and an "unobserved" finding, never swallowed silently
            holder["error"] = e

    gpu: dict[str, list[float] | None] = {}
    for _r, i, inst in dep.inv.instances("decode"):
        if inst.host not in gpu:
            gpu[inst.host] = gpu_utilisation(dep, inst.host)

    good = [p for p in inf.points if p.complete]
    obs: dict[str, Any] = {"window_s": window_s, "gpu_util": gpu, "services": services}
    unobserved = unobserved_lines(inf.points, inf.verdict is not None, holder.get("error"), stopped=stopped)
    if unobserved:
        obs["unobserved"] = unobserved
    observations: list[dict[str, Any]] = []
    for label, sv in services.items():
        observations.append({"what": "service", "target": label,
                             "status": "skip" if sv["active"] is None else "pass" if sv["active"] else "fail",
                             "observed": f"{sv['service']}: " + (
                                 sv["detail"] if sv["active"] is None or (not sv["active"] and sv["detail"]) else
                                 f"running (pid {sv['pid']})" if sv["active"] else "not running (no process)")})
    fh = holder.get("fh")
    if fh is not None:
        for layer in ("health", "e2e", "transfer", "lineage"):
            rows = [r.to_dict() for r in fh.layers.get(layer, [])]
            obs[layer] = rows
            observations += [{"what": layer, "target": r["target"], "status": r["status"],
                              "observed": f"{r['name']}: {r['observed']}"} for r in rows]
    elif "error" in holder:
        observations.append({"what": "final-health", "status": "fail", "observed": str(holder["error"])})
    if good:
        first, last = good[0], good[-1]
        obs["transfer_failed"] = {k: c.get("transfer_failed", 0.0) for k, c in last.counters.items()}
        obs["bootstrap_failed"] = {k: c.get("bootstrap_failed", 0.0) for k, c in last.counters.items()}
        obs["transfer_failed_delta"] = _delta(first, last, "transfer_failed")
        obs["bootstrap_failed_delta"] = _delta(first, last, "bootstrap_failed")
        # decode progress over the quiet window only (the probe's own tokens come after it)
        if inf.verdict is not None and inf.verdict.generation_tokens_delta is not None:
            obs["generation_tokens_delta"] = inf.verdict.generation_tokens_delta
        window_pts = [p for p in good if p.t <= window_s + interval_s]
        obs["gen_throughput"] = (window_pts or good)[-1].gen_throughput
    if inf.verdict is not None:
        obs["inflight"] = {"verdict": inf.verdict.verdict, "conclusive": inf.verdict.conclusive,
                           "summary": inf.verdict.summary, "holders": inf.holders()}
        observations.append({"what": "inflight", "target": "prefill+decode",
                             "status": {"drained": "pass", "busy": "warn", "pinned": "fail"}[inf.verdict.verdict],
                             "observed": inf.verdict.summary})
    elif stopped & set(workers):
        observations.append({"what": "inflight", "target": "prefill+decode", "status": "skip",
                             "observed": "not judged: " + ", ".join(short_label(w) for w in workers if w in stopped)
                                         + " not running"})
    else:
        observations.append({"what": "inflight", "target": "prefill+decode", "status": "fail",
                             "observed": "not observed: no complete /metrics sample"})
    observations.append({"what": "transfer failures (window)", "target": "prefill+decode",
                         "status": "skip" if not good else
                         "fail" if (obs.get("transfer_failed_delta") or obs.get("bootstrap_failed_delta"))
                         else "pass",
                         "observed": "not read: no complete /metrics sample" if not good else
                                     f"transfer_failed +{fmt_count(obs.get('transfer_failed_delta', 0))}, "
                                     f"bootstrap_failed +{fmt_count(obs.get('bootstrap_failed_delta', 0))} "
                                     f"over {fmt_s(window_s)}"})
    gen_txt = ("generation tokens +" + fmt_count(obs["generation_tokens_delta"])
               if "generation_tokens_delta" in obs else "generation tokens not measured")
    observations.append({"what": "decode progress", "target": "decode",
                         "status": "pass" if "generation_tokens_delta" in obs else "skip",
                         "observed": gen_txt + "".join(f"; gen_throughput {k}={fmt_count(v)} tok/s"
                                                       for k, v in obs.get("gen_throughput", {}).items())})
    for host, vals in gpu.items():
        observations.append({"what": "GPU utilisation", "target": host, "status": "skip" if vals is None else "pass",
                             "observed": "not available (no nvidia-smi)" if vals is None else
                             ", ".join(f"{v:g}%" for v in vals)})
    findings = judge_triage(obs)
    return TriageReport(dep.inv.name, observations, findings, facts={k: v for k, v in obs.items()
                                                                     if k not in ("health", "e2e", "transfer",
                                                                                  "lineage")}, partial=partial)


def unobserved_lines(points: list, have_verdict: bool, fh_error: BaseException | None, *,
                     stopped: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """What triage could not read, one line each (the observed part of an "unobserved" finding). Pure.
    `points`: the inflight samples (each with `errors`: label -> why its /metrics was unreadable). `stopped`: labels
    whose service is not running -- their unreadable /metrics is explained (the "not running" finding), so no
    inflight verdict because of them alone is not an "unobserved" line."""
    lines = []
    if not have_verdict:
        errors: dict[str, str] = {}
        for p in points:
            errors.update(p.errors)
        unexplained = {k: v for k, v in errors.items() if k not in stopped}
        if stopped and not unexplained and not any(p.complete for p in points):
            pass    # only stopped workers were unreadable (or none was sampled, as nothing ran): "not running" says it
        else:
            if points and all(p.errors and not p.per_worker for p in points):
                head = f"no worker's /metrics could be read in any of {len(points)} sample(s)"
            else:
                head = f"no complete /metrics sample in {len(points)} sample(s): no inflight verdict"
            shown = unexplained if stopped else errors
            lines.append(head + (": " + "; ".join(f"{k}: {v}" for k, v in shown.items()) if shown else "")
                         + (f" (not running: {', '.join(short_label(s) for s in sorted(stopped))})"
                            if stopped else ""))
    if fh_error is not None:
        msg = getattr(fh_error, "message", None) or str(fh_error) or type(fh_error).__name__
        lines.append(f"health, end-to-end probe, transfer counters and restart lineage were not read: "
                     f"{type(fh_error).__name__}: {msg.splitlines()[0]}")
    return lines


def _delta(first, last, key: str) -> float:
    total = 0.0
    for label, c in last.counters.items():
        before = first.counters.get(label, {}).get(key)
        now = c.get(key, 0.0)
        total += now if before is None or now < before else now - before
    return total
