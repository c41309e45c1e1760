"""Realistic reports of a 4 prefill x 4 decode + 2 router deployment over four hosts, built with the real judges and
report dataclasses, for the screen tests of tests/unit/test_xpyd_screens.py."""

from __future__ import annotations

from pdctl.checks.flags import judge_flags
from pdctl.checks.health import judge_readiness
from pdctl.checks.metrics import parse_metrics
from pdctl.checks.result import CheckResult, Status
from pdctl.checks.role_status import RoleStatus
from pdctl.checks.transfer import judge_transfer
from pdctl.checks.triage import ServiceState, TriageObservations, judge_triage, observation_rows
from pdctl.ops.triage import TriageReport
from pdctl.ops.verify import HealthReport

N = 4
HOSTS = [f"gpu-host-{i + 1}.example.internal" for i in range(N)]
PREFILLS = [f"prefill[{i}]@{HOSTS[i]}:30000" for i in range(N)]
DECODES = [f"decode[{i}]@{HOSTS[i]}:30002" for i in range(N)]
ROUTERS = [f"router[{i}]@{HOSTS[i]}:30001" for i in range(2)]
LABELS = PREFILLS + DECODES + ROUTERS
BROKEN = DECODES[2]  # the failing instance, in the middle of the inventory
BROKEN_FLAG = "--mem-fraction-static"


def _metrics(failed: int) -> str:
    return (
        "# TYPE sglang:num_transfer_failed_reqs_total counter\n"
        f'sglang:num_transfer_failed_reqs_total{{tp_rank="0"}} {failed}\n'
        "# TYPE sglang:num_bootstrap_failed_reqs_total counter\n"
        'sglang:num_bootstrap_failed_reqs_total{tp_rank="0"} 0\n'
    )


def _argv(label: str, role: str, port: int, mem: str) -> list[str]:
    argv = [
        "python3",
        "-m",
        "sglang.launch_server",
        "--served-model-name",
        "llama-70b",
        "--disaggregation-mode",
        role,
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        "--disaggregation-transfer-backend",
        "nixl",
        "--enable-metrics",
        "--mem-fraction-static",
        mem,
    ]
    return argv + (["--disaggregation-bootstrap-port", "8998"] if role == "prefill" else [])


def _declared(role: str, port: int) -> dict:
    d = {
        "--served-model-name": "llama-70b",
        "--disaggregation-mode": role,
        "--host": "0.0.0.0",
        "--port": port,
        "--disaggregation-transfer-backend": "nixl",
        "--enable-metrics": True,
        BROKEN_FLAG: 0.85,
    }
    return d | ({"--disaggregation-bootstrap-port": 8998} if role == "prefill" else {})


def health_4x4(*, failed: bool = True, drift_everywhere: bool = False) -> HealthReport:
    """final-health of the 4x4+2: with `failed`, decode[2] has 3 failed KV transfers and its live
    --mem-fraction-static (0.9) differs from the inventory's (0.85); `drift_everywhere` drifts every decode."""
    health = [
        CheckResult("health", lab, "/health", Status.PASS, observed="HTTP 200", expected="HTTP 200", detail="12.5 ms")
        for lab in LABELS
    ]
    for lab in ROUTERS:
        r = judge_readiness(
            200, {"status": "ready", "healthy_workers": 8, "total_workers": 8}, expect_workers=8, target=lab
        )
        health.insert(health.index(next(h for h in health if h.target == lab)) + 1, r)
    e2e = [
        CheckResult(
            "e2e",
            lab,
            "chat completion",
            Status.PASS,
            observed="HTTP 200 in 208.1 ms, 8 tokens",
            expected="HTTP 200, non-empty varied content",
            detail="non-empty, not a single repeated token",
        )
        for lab in ROUTERS
    ]
    transfer, flags = [], []
    for lab in PREFILLS + DECODES:
        bad = failed and lab == BROKEN
        transfer += judge_transfer(lab, parse_metrics(_metrics(3 if bad else 0)))
        role, port = ("prefill", 30000) if lab.startswith("prefill") else ("decode", 30002)
        drift = failed and (lab == BROKEN or (drift_everywhere and role == "decode"))
        flags += judge_flags(lab, _argv(lab, role, port, "0.9" if drift else "0.85"), {}, _declared(role, port), {})
    lineage = [
        CheckResult(
            "lineage",
            lab,
            "prefill uptime",
            Status.PASS,
            observed="up 2d 3h (pid 4242, since 2026-11-29 11:00:00)",
            detail="observed; same process as at the last co-restart",
        )
        for lab in PREFILLS
    ]
    lineage += [
        CheckResult(
            "lineage",
            lab,
            "restart lineage",
            Status.PASS,
            observed="unchanged since the last co-restart (pid 5151)",
            expected="co-restarted with its prefill",
            detail="observed: same pid and start time as recorded",
        )
        for lab in DECODES
    ]
    return HealthReport(
        "prod-4x4.yaml", {"health": health, "e2e": e2e, "transfer": transfer, "flags": flags, "lineage": lineage}
    )


def triage_4x4(*, stopped: bool = True) -> TriageReport:
    """triage of the 4x4+2, judged by the real judge: with `stopped`, decode[2]'s process has exited (its /health
    refused, both routers see 7/8 workers)."""
    services = {}
    for lab in LABELS:
        role = lab.split("[")[0]
        i = int(lab.split("[")[1].split("]")[0])
        down = stopped and lab == BROKEN
        services[lab] = ServiceState(
            role,
            i,
            f"pdctl-prod-{role}-{i}.service",
            not down,
            None if down else 4000 + i,
            "exited 1 (see pdctl logs decode)" if down else "",
        )
    rep = health_4x4(failed=False)
    health = rep.layers["health"]
    if stopped:
        health = [
            CheckResult("health", h.target, h.name, Status.FAIL, observed="connection refused", expected=h.expected)
            if h.target == BROKEN
            else h
            for h in health
        ]
        health = [
            judge_readiness(
                200, {"status": "ready", "healthy_workers": 7, "total_workers": 8}, expect_workers=8, target=h.target
            )
            if h.name == "/readiness"
            else h
            for h in health
        ]
    obs = TriageObservations(
        window_s=6.0,
        services=services,
        health=health,
        e2e=rep.layers["e2e"],
        transfer=rep.layers["transfer"],
        lineage=rep.layers["lineage"],
        transfer_failed={lab: 0.0 for lab in PREFILLS + DECODES},
        bootstrap_failed={lab: 0.0 for lab in PREFILLS + DECODES},
        transfer_failed_delta=0.0,
        bootstrap_failed_delta=0.0,
        generation_tokens_delta=0.0,
        gen_throughput={lab: 0.0 for lab in DECODES},
        gpu_util={h: [0.0, 0.0] for h in HOSTS},
    )
    return TriageReport("prod-4x4.yaml", observation_rows(obs), judge_triage(obs), obs)


def status_4x4(*, stopped: bool = True) -> list[RoleStatus]:
    """`pdctl status` rows (ops.lifecycle.status's shape) of the 4x4+2 under systemd."""
    rows = []
    for k, lab in enumerate(LABELS):
        role = lab.split("[")[0]
        i = int(lab.split("[")[1].split("]")[0])
        down = stopped and lab == BROKEN
        rows.append(
            RoleStatus(
                lab,
                role,
                i,
                HOSTS[i],
                f"pdctl-prod-{role}-{i}.service",
                active=not down,
                pid=None if down else 412000 + k,
                started_at=None if down else 1_764_000_000.0 - k,
                uptime_s=None if down else 186400.0 + k,
                detail="failed (Result: exit-code) since 2026-12-01 10:00:00" if down else "active (running)",
                restarts=0,
            )
        )
    return rows


__all__ = [
    "BROKEN",
    "BROKEN_FLAG",
    "DECODES",
    "HOSTS",
    "LABELS",
    "PREFILLS",
    "ROUTERS",
    "health_4x4",
    "status_4x4",
    "triage_4x4",
]
