"""The triage judge: findings from typed observations, each split into what was observed and what is inferred, with
the recommended action. Pure: `judge_triage(TriageObservations) -> list[Finding]`; ops.triage gathers.

A role whose service is not active is a "not running" finding, and refused connections to it (health, the end-to-end
probe) are explained by it: never read as KV transfer failures. "No finding" must mean "looked and saw nothing
wrong", never "could not look": what could not be read is an "unobserved" finding that needs action.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pdctl.checks.inflight import BALANCE_WINDOW_S, ROOM_BALANCE, fmt_count, fmt_s, short_gauges
from pdctl.checks.layers import TRIAGE_LAYERS
from pdctl.checks.result import CheckResult, Status
from pdctl.checks.triage_evidence import (
    consequence_line,
    decode_waiting,
    fast_canary_failures,
    fastest_failure_ms,
    held_canaries,
    names_stopped,
    prefill_rooms_held,
    router_view,
    short_reason,
)
from pdctl.checks.triage_finding import Finding
from pdctl.checks.triage_outputs import OutputsSummary, outputs_findings
from pdctl.serialize import JSON_OFF

PAIR_ACTION = "run `pdctl restart --pair` (prefill -> decode -> router, readiness-gated, verified)"
DEPLOY_ACTION = "run `pdctl deploy` (starts prefill -> decode -> router, readiness-gated, then final-health)"
PAIR_STEP, DEPLOY_STEP = "pdctl restart --pair", "pdctl deploy"
#: the final-health layers triage reads (checks/layers.py `triage=True`; live flags say nothing about a stall)
FINAL_HEALTH_LAYERS = TRIAGE_LAYERS


@dataclass
class ServiceState:
    """The service manager's view of one role instance. `active` None: the status could not be read (unknown,
    never judged as stopped)."""

    role: str
    index: int
    service: str
    active: bool | None
    pid: int | None = None
    detail: str = ""


@dataclass
class InflightSummary:
    """The inflight verdict over triage's quiet window, as the judge needs it."""

    verdict: str  # drained | busy | pinned
    conclusive: bool
    summary: str
    holders: dict[str, dict[str, float]] = field(default_factory=dict)  # label -> nonzero gauges at the end
    pinned_by: str = ""  # checks.inflight NO_PROGRESS | ROOM_BALANCE when pinned


@dataclass
class TriageObservations:
    """Everything triage gathered. Empty or None = not observed (what could not be read at all is in `unobserved`)."""

    window_s: float | None = None
    services: dict[str, ServiceState] = field(default_factory=dict)  # label -> state
    # final-health's layers: the report's findings and observations say what they found (not part of `facts`)
    health: list[CheckResult] = field(default_factory=list, metadata=JSON_OFF)
    e2e: list[CheckResult] = field(default_factory=list, metadata=JSON_OFF)
    transfer: list[CheckResult] = field(default_factory=list, metadata=JSON_OFF)
    lineage: list[CheckResult] = field(default_factory=list, metadata=JSON_OFF)
    pairs: list[CheckResult] = field(default_factory=list, metadata=JSON_OFF)  # a canary straight to each pair
    inflight: InflightSummary | None = None
    transfer_failed: dict[str, float] = field(default_factory=dict)  # label -> total
    bootstrap_failed: dict[str, float] = field(default_factory=dict)
    transfer_failed_delta: float | None = None  # over the window
    bootstrap_failed_delta: float | None = None
    generation_tokens_delta: float | None = None  # decode progress over the quiet window
    gen_throughput: dict[str, float] = field(default_factory=dict)  # decode label -> tok/s
    gpu_util: dict[str, list[float] | None] = field(default_factory=dict)  # host -> percentages (None: no nvidia-smi)
    unobserved: list[str] = field(default_factory=list)
    lock_holder: str | None = None  # "alice (restart, pid 7 on h1, for 12s)": a change under way meanwhile
    outputs: OutputsSummary | None = None  # `--outputs`: what the outputs check saw

    def final_health_layers(self) -> dict[str, list[CheckResult]]:
        """layer name -> its results, for each of FINAL_HEALTH_LAYERS (a unit test holds the two equal). Pure."""
        return {
            "health": self.health,
            "e2e": self.e2e,
            "transfer": self.transfer,
            "lineage": self.lineage,
            "pairs": self.pairs,
        }

    def take_final_health(self, layers: Mapping[str, list[CheckResult]]) -> None:
        """Keep the results of the layers triage reads from a final-health report's `layers`, each by its name."""
        self.health = list(layers.get("health", []))
        self.e2e = list(layers.get("e2e", []))
        self.transfer = list(layers.get("transfer", []))
        self.lineage = list(layers.get("lineage", []))
        self.pairs = list(layers.get("pairs", []))


@dataclass
class Observation:
    """One row of triage's observations table."""

    what: str
    target: str
    status: Status
    observed: str


def short_label(label: str) -> str:
    """'prefill[0]' from 'prefill[0]@gpu1:30000'. Pure."""
    return label.split("@", 1)[0]


def _lineage_hazards(lineage: list[CheckResult]) -> list[CheckResult]:
    return [r for r in lineage if r.status in (Status.FAIL, Status.WARN) and r.data.get("hazard")]


def _idle_lines(obs: TriageObservations) -> list[str]:
    idle: list[str] = []
    if obs.generation_tokens_delta is not None:
        idle.append(
            f"decode generated {fmt_count(obs.generation_tokens_delta)} tokens over the "
            f"{fmt_s(obs.window_s) if obs.window_s else '?'} window"
        )
    if obs.gen_throughput:
        idle.append("decode gen_throughput " + ", ".join(f"{k}={v:g} tok/s" for k, v in obs.gen_throughput.items()))
    for host, vals in obs.gpu_util.items():
        idle.append(f"GPU utilisation on {host}: " + (", ".join(f"{v:g}%" for v in vals) if vals else "not available"))
    return idle


def lock_held_finding(holder: str) -> Finding:
    """Another operator's change (restart, deploy, down) ran while triage looked: what it saw may be that change."""
    return Finding(
        "a change to the deployment is under way",
        "warn",
        [f"the deployment lock is held by {holder}"],
        ["its restarts or drains may explain what else triage found: a worker starting is not a worker wedged"],
        "wait for that operation to end (`pdctl history` names it), then run `pdctl triage` again",
        kind="lock-held",
        next_step="pdctl history",
    )


def judge_triage(obs: TriageObservations) -> list[Finding]:
    """The findings, most fundamental first: not running, unhealthy, unobserved, pinned, transfers failing (with or
    without the lineage hazard), old failures, busy. Pure."""
    findings: list[Finding] = []
    stopped = [label for label, sv in obs.services.items() if sv.active is False]
    # a router's view of a stopped worker (its readiness, its breaker for it) is explained by that worker too
    explained = {h.name for h in obs.health if router_view(h) and names_stopped(h, stopped)}
    down = [h for h in obs.health if h.failed and h.target not in stopped and h.name not in explained]
    # a canary to a stopped worker fails for that reason, not a transfer's (the "not running" finding says it)
    gone = {short_label(label) for label in stopped}
    pairs_up = [r for r in obs.pairs if not gone & {side.strip() for side in r.target.split("->")}]
    fast = fast_canary_failures(pairs_up)
    hazards = _lineage_hazards(obs.lineage)
    # failing now: counted during the window, a canary answered with a failure, or (final-health, which has no
    # window) a lone restart while requests through the router fail and the failure counters are not clean
    transfers_failing = bool(
        obs.transfer_failed_delta
        or obs.bootstrap_failed_delta
        or fast
        or (hazards and any(e.failed for e in obs.e2e) and any(t.failed for t in obs.transfer))
    )
    consequences: list[CheckResult] = []
    if transfers_failing:  # a breaker opened by failing requests is their consequence, not a component down
        consequences = [h for h in down if router_view(h)]
        down = [h for h in down if not router_view(h)]
    down_stopped = [h for h in obs.health if h.failed and (h.target in stopped or h.name in explained)]
    e2e_bad = [e for e in obs.e2e if e.failed]
    e2e_explained: list[CheckResult] = []
    if stopped:  # a probe through a deployment with a stopped role fails for that reason: no transfer evidence
        e2e_explained, e2e_bad = e2e_bad, []
    probe_unhealthy: list[CheckResult] = []
    if down and not (obs.transfer_failed_delta or obs.bootstrap_failed_delta):
        # a wedged worker times the probe out too; with no failure counted, that is no evidence of a KV transfer
        probe_unhealthy, e2e_bad = e2e_bad, []
    idle = _idle_lines(obs)

    if obs.lock_holder:
        findings.append(lock_held_finding(obs.lock_holder))
    if stopped:
        findings.append(not_running_finding(obs.services, stopped, down_stopped, e2e_explained))
    if down:
        findings.append(
            Finding(
                "a component is not healthy",
                "action",
                [f"{h.target} {h.name}: {h.observed}" for h in down]
                + [
                    f"end-to-end probe through {e.target}: {e.observed} (no transfer failure counted: the unhealthy "
                    "component explains it)"
                    for e in probe_unhealthy
                ],
                ["the process is down, starting, or its HTTP server is wedged"],
                "read `pdctl logs ROLE` and `pdctl status`; then `pdctl restart --pair` (a lone restart of prefill or "
                "decode leaves the pair's KV bootstrap degraded)",
                kind="health",
                next_step="pdctl status",
            )
        )
    if obs.unobserved:
        findings.append(
            Finding(
                "could not observe "
                + (
                    "the PD queues and counters"
                    if any("/metrics" in u for u in obs.unobserved)
                    else "part of the deployment"
                ),
                "action",
                list(obs.unobserved),
                [
                    "without these readings triage cannot tell a healthy deployment from a wedged one: the absence of "
                    "other findings proves nothing"
                ],
                "check that each worker answers /metrics (`pdctl status`, `pdctl logs ROLE`; SGLang needs "
                "--enable-metrics), then run `pdctl triage` again",
                kind="unobserved",
                next_step="pdctl status",
            )
        )
    inf = obs.inflight
    held_rooms = prefill_rooms_held(inf.holders) if inf is not None else []
    # a decode waiting for KV its prefill already failed reads as a pin; with transfers failing fast after a lone
    # restart and no prefill holding a room, it is the degraded bootstrap's wait, said in that finding (one finding
    # per cause), not the update_status race
    waiting_out = bool(hazards and transfers_failing and not held_rooms)
    if inf is not None and inf.verdict == "pinned" and not waiting_out:
        under_load = inf.pinned_by == ROOM_BALANCE
        lines = [inf.summary] + [f"{k} holds {short_gauges(gs)}" for k, gs in inf.holders.items()]
        lines += [] if under_load else idle
        lines += held_canaries(obs.pairs)
        if not down and not stopped:
            lines.append("every /health answered 200")
        ruled_out = []
        if not hazards and not transfers_failing:
            ruled_out.append(
                "a degraded bootstrap (transfers failing after a lone restart): the restart lineage is clean and "
                "no transfer failed during the window"
            )
        findings.append(
            Finding(
                "a request pinned in the prefill inflight queue while traffic flows (the seed's wedge, under load)"
                if under_load
                else "requests pinned in the PD queues with decode idle (the seed's silent wedge)",
                "action" if inf.conclusive else "warn",
                lines,
                [
                    "a KV transfer room is stuck (e.g. a Failed status overwritten to Transferring by a late "
                    "chunk write, the seed's update_status race); it will not time out on its own",
                    "a green /health says nothing here: it runs a fake-bootstrap generation that never moves KV",
                ],
                "collect `pdctl logs prefill` and `pdctl logs decode` first, then "
                + PAIR_ACTION
                + "; confirm with `pdctl verify inflight`, and check the build carries the terminal-status fix",
                kind="pinned",
                next_step=PAIR_STEP,
                ruled_out=ruled_out,
            )
        )
    evidence = TransferEvidence(
        fast=fast,
        consequences=consequences,
        held_rooms=held_rooms,
        waiting=decode_waiting(inf.holders) if waiting_out and inf is not None else [],
    )
    failing = _transfer_findings(
        obs, findings, hazards, e2e_bad, e2e_explained + probe_unhealthy, down, stopped, evidence
    )
    if inf is not None and inf.verdict == "busy" and not failing:
        findings.append(
            Finding(
                "requests queued but progressing",
                "warn",
                [inf.summary] + idle,
                [
                    "normal work (e.g. a post-prefill room waiting for decode to pull its KV); a room pinned "
                    "under steady traffic shows as a prefill holding rooms no decode waits for (the room balance), "
                    f"judged over {fmt_s(BALANCE_WINDOW_S)}"
                ],
                "nothing now; if it persists without load, run `pdctl verify inflight --window 60`",
                kind="busy",
                next_step="pdctl verify inflight --window 60",
            )
        )
    if obs.outputs is not None:
        findings += outputs_findings(obs.outputs)
    return findings


@dataclass
class TransferEvidence:
    """What tells a transfer failing fast from a held room (checks/triage_evidence.py), for the transfer finding."""

    fast: list[str] = field(default_factory=list)  # pair canaries answered with an error
    consequences: list[CheckResult] = field(default_factory=list)  # the routers' breakers the failures opened
    held_rooms: list[str] = field(default_factory=list)  # prefills holding a room at the end of the window
    waiting: list[str] = field(default_factory=list)  # decodes waiting for KV their prefill already failed


def _race_ruled_out(obs: TriageObservations, ev: TransferEvidence) -> list[str]:
    """Why a failing transfer is not the seed's update_status race, when the evidence says so. Pure."""
    if ev.held_rooms:
        return []
    counted = (obs.transfer_failed_delta or 0) + (obs.bootstrap_failed_delta or 0)
    ms = fastest_failure_ms(obs.pairs)
    if ev.fast:
        how = (
            "transfers fail fast ("
            + (f"a canary's failure came back in {ms:g} ms" if ms is not None else "a canary's failure came back")
            + ")"
        )
    else:
        how = f"transfers fail and are counted (+{fmt_count(counted)} over the window)" if counted else ""
    if not how or obs.inflight is None:
        return []
    return [
        f"the update_status race (a room held Transferring, never ending): {how} and no prefill holds a room "
        "(every prefill inflight queue 0)"
    ]


def _transfer_findings(
    obs: TriageObservations,
    findings: list[Finding],
    hazards: list[CheckResult],
    e2e_bad: list[CheckResult],
    e2e_explained: list[CheckResult],
    down: list[CheckResult],
    stopped: list[str],
    ev: TransferEvidence,
) -> bool:
    """Append the transfer/lineage finding (at most one); return whether transfers are failing now."""
    tf_tot, bf_tot = sum(obs.transfer_failed.values()), sum(obs.bootstrap_failed.values())
    tf_d, bf_d = obs.transfer_failed_delta or 0.0, obs.bootstrap_failed_delta or 0.0
    failing = tf_d > 0 or bf_d > 0 or bool(e2e_bad) or bool(ev.fast)
    fail_obs = []
    if tf_d or bf_d:
        fail_obs.append(
            f"transfer_failed +{fmt_count(tf_d)}, bootstrap_failed +{fmt_count(bf_d)} over the window "
            f"(totals {fmt_count(tf_tot)} / {fmt_count(bf_tot)})"
        )
    elif tf_tot or bf_tot:
        fail_obs.append(
            f"transfer_failed total {fmt_count(tf_tot)}, bootstrap_failed total {fmt_count(bf_tot)} "
            "(no increase during the window)"
        )
    fail_obs += ev.fast
    for e in e2e_bad:
        fail_obs.append(f"end-to-end probe through {e.target}: {e.observed} ({short_reason(e.detail)})")
    if not e2e_bad and not e2e_explained and obs.e2e:
        fail_obs.append("end-to-end probe through the router: " + ", ".join(e.observed for e in obs.e2e))
    haz_obs = [f"{h.target}: {h.observed}" for h in hazards]
    after = ([consequence_line(ev.consequences)] if ev.consequences else []) + ev.waiting
    healthy = [] if down or stopped else ["every worker's /health answered 200"]

    if hazards and failing:
        findings.append(
            Finding(
                "KV transfers failing after a lone restart: the degraded-bootstrap hazard",
                "action",
                fail_obs + haz_obs + after + healthy,
                [
                    "decode (or prefill) was restarted without its pair; the long-running prefill keeps stale "
                    "NIXL peer state, so transfers to the new process fail silently (the seed's degraded bootstrap)"
                ]
                + (
                    [
                        "the decode's waiting requests end on their own only after "
                        "SGLANG_DISAGGREGATION_WAITING_TIMEOUT (300 s by default); every new one fails the same way "
                        "until the pair is co-restarted"
                    ]
                    if ev.waiting
                    else []
                ),
                PAIR_ACTION + "; then `pdctl verify final-health`",
                kind="degraded-bootstrap",
                next_step=PAIR_STEP,
                ruled_out=_race_ruled_out(obs, ev),
            )
        )
    elif failing:
        findings.append(
            Finding(
                "KV transfers failing",
                "action",
                fail_obs + after,
                [
                    "the pair cannot move KV for new requests; no restart-lineage hazard was seen, so read the "
                    "logs for the failing rooms (bootstrap port reachable? decode/prefill restarted outside pdctl?)"
                ],
                "read `pdctl logs prefill` / `pdctl logs decode`; if it persists, " + PAIR_ACTION,
                kind="transfer",
                next_step="pdctl logs prefill",
            )
        )
    elif hazards:
        findings.append(
            Finding(
                "restart-lineage hazard (transfers not failing yet)",
                "action" if any(h.failed for h in hazards) else "warn",
                haz_obs + (fail_obs or ["no transfer failure during the window"]),
                [
                    "the pair was not co-restarted: the degraded-bootstrap hazard may surface as silent transfer "
                    "failures"
                ],
                PAIR_ACTION + " at the next safe moment",
                kind="lineage",
                next_step=PAIR_STEP,
            )
        )
    elif tf_tot or bf_tot:
        findings.append(
            Finding(
                "old transfer failures on the counters",
                "warn",
                fail_obs,
                ["failures happened earlier (e.g. aborted requests); none during this window"],
                "record a baseline (`pdctl verify final-health --record-baseline`) and watch `--since-baseline`",
                kind="transfer-history",
                next_step="pdctl verify final-health --record-baseline",
            )
        )
    return failing


def not_running_finding(
    services: dict[str, ServiceState], stopped: list[str], health_fails: list[CheckResult], e2e_fails: list[CheckResult]
) -> Finding:
    """The "not running" finding: which roles have no process, the probes that were refused because of it, and the
    action: `pdctl deploy` when nothing runs, else `pdctl restart --pair`. Pure."""
    everything = len(stopped) == len(services)
    observed = []
    for label in stopped:
        sv = services[label]
        what = f"service {sv.service}" if sv.service else "its service"
        observed.append(f"{label}: {what}: {sv.detail or 'not running (no process)'}")
    refused = [f"{h.target} {h.name}: {h.observed}" for h in health_fails]
    refused += [f"end-to-end probe through {e.target}: {e.observed}" for e in e2e_fails]
    if refused:
        observed.append("consistent with that: " + "; ".join(refused))
    roles = sorted({services[label].role for label in stopped})
    names = ", ".join(short_label(s) for s in stopped)
    if everything:
        inferred = [
            "the deployment is stopped (e.g. `pdctl down`, a reboot): refused connections to stopped servers "
            "say nothing about KV transfers, so no transfer or queue finding is drawn from them"
        ]
        action, step = DEPLOY_ACTION, DEPLOY_STEP
    else:
        inferred = [
            f"{names} stopped or exited while the rest runs on; requests "
            "through the router fail for that reason, not because of KV transfers"
        ]
        logs = " / ".join(f"`pdctl logs {r}`" for r in roles)
        action = (
            f"read {logs} for why it stopped; then "
            + PAIR_ACTION
            + " (a lone start of prefill or decode leaves the pair's KV bootstrap degraded)"
        )
        step = PAIR_STEP
    return Finding(
        f"not running: {names} (no process)", "action", observed, inferred, action, kind="not-running", next_step=step
    )


def unobserved_lines(
    points: list,
    have_verdict: bool,
    fh_error: BaseException | None,
    *,
    stopped: set[str] | frozenset[str] = frozenset(),
) -> list[str]:
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
        if not (stopped and not unexplained and not any(p.complete for p in points)):
            if points and all(p.errors and not p.per_worker for p in points):
                head = f"no worker's /metrics could be read in any of {len(points)} sample(s)"
            else:
                head = f"no complete /metrics sample in {len(points)} sample(s): no inflight verdict"
            shown = unexplained if stopped else errors
            lines.append(
                head
                + (": " + "; ".join(f"{k}: {v}" for k, v in shown.items()) if shown else "")
                + (f" (not running: {', '.join(short_label(s) for s in sorted(stopped))})" if stopped else "")
            )
    if fh_error is not None:
        msg = getattr(fh_error, "message", None) or str(fh_error) or type(fh_error).__name__
        lines.append(
            f"health, end-to-end probe, transfer counters and restart lineage were not read: "
            f"{type(fh_error).__name__}: {msg.splitlines()[0]}"
        )
    return lines


def observation_rows(obs: TriageObservations, fh_error: BaseException | None = None) -> list[Observation]:
    """The observations table: one row per service, final-health check (or the error that stopped final-health),
    inflight, transfer window, decode progress and GPU host. Pure."""
    stopped = {label for label, sv in obs.services.items() if sv.active is False}
    workers = [label for label, sv in obs.services.items() if sv.role in ("prefill", "decode")]
    rows: list[Observation] = []
    for label, sv in obs.services.items():
        status = Status.SKIP if sv.active is None else Status.PASS if sv.active else Status.FAIL
        seen = (
            sv.detail
            if sv.active is None or (not sv.active and sv.detail)
            else f"running (pid {sv.pid})"
            if sv.active
            else "not running (no process)"
        )
        rows.append(Observation("service", label, status, f"{sv.service}: {seen}"))
    for layer, results in obs.final_health_layers().items():
        rows += [Observation(layer, r.target, r.status, f"{r.name}: {r.observed}") for r in results]
    if fh_error is not None:
        rows.append(Observation("final-health", "", Status.FAIL, str(fh_error)))
    if obs.inflight is not None:
        rows.append(
            Observation(
                "inflight",
                "prefill+decode",
                {"drained": Status.PASS, "busy": Status.WARN, "pinned": Status.FAIL}[obs.inflight.verdict],
                obs.inflight.summary,
            )
        )
    elif stopped & set(workers):
        rows.append(
            Observation(
                "inflight",
                "prefill+decode",
                Status.SKIP,
                "not judged: " + ", ".join(short_label(w) for w in workers if w in stopped) + " not running",
            )
        )
    else:
        rows.append(Observation("inflight", "prefill+decode", Status.FAIL, "not observed: no complete /metrics sample"))
    tf, bf = obs.transfer_failed_delta, obs.bootstrap_failed_delta
    if tf is None:
        rows.append(
            Observation(
                "transfer failures (window)", "prefill+decode", Status.SKIP, "not read: no complete /metrics sample"
            )
        )
    else:
        rows.append(
            Observation(
                "transfer failures (window)",
                "prefill+decode",
                Status.FAIL if (tf or bf) else Status.PASS,
                f"transfer_failed +{fmt_count(tf or 0)}, bootstrap_failed "
                f"+{fmt_count(bf or 0)} over {fmt_s(obs.window_s)}",
            )
        )
    gen = obs.generation_tokens_delta
    rows.append(
        Observation(
            "decode progress",
            "decode",
            Status.SKIP if gen is None else Status.PASS,
            ("generation tokens not measured" if gen is None else "generation tokens +" + fmt_count(gen))
            + "".join(f"; gen_throughput {k}={fmt_count(v)} tok/s" for k, v in obs.gen_throughput.items()),
        )
    )
    for host, vals in obs.gpu_util.items():
        rows.append(
            Observation(
                "GPU utilisation",
                host,
                Status.SKIP if vals is None else Status.PASS,
                "not available (no nvidia-smi)" if vals is None else ", ".join(f"{v:g}%" for v in vals),
            )
        )
    return rows
