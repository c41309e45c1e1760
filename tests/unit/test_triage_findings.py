"""Pure triage logic: findings from observations, observed vs inferred, the action, nvidia-smi parsing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pdctl.checks.gpu import parse_gpu_util
from pdctl.checks.result import CheckResult, Status
from pdctl.checks.triage import InflightSummary, ServiceState, TriageObservations, judge_triage
from pdctl.serialize import to_data

FIXTURES = Path(__file__).parent / "fixtures"


def h(target, status="pass", observed="HTTP 200", name="/health", **data):
    return CheckResult("health", target, name, Status(status), observed=observed, data=data)


def inflight(verdict, conclusive=True, summary="", holders=None):
    return InflightSummary(verdict, conclusive, summary, holders or {})


HEALTHY = TriageObservations(
    health=[h("prefill[0]"), h("decode[0]"), h("router[0]")],
    e2e=[h("router[0]", observed="HTTP 200 in 40 ms, 8 tokens", name="chat completion")],
    lineage=[h("decode[0]", observed="unchanged since the last co-restart", name="restart lineage")],
    inflight=inflight("drained", summary="all PD queues 0 for 6s"),
    transfer_failed={"prefill[0]": 0.0},
    bootstrap_failed={"prefill[0]": 0.0},
    transfer_failed_delta=0.0,
    bootstrap_failed_delta=0.0,
    generation_tokens_delta=0.0,
    gpu_util={"local": None},
    window_s=6,
)


def dict(base, **changes):  # the tests read as "HEALTHY, but with ..."
    return replace(base, **changes)


def kinds(findings):
    return [f.kind for f in findings]


def test_healthy_has_no_finding():
    assert judge_triage(HEALTHY) == []


def test_degraded_bootstrap_after_decode_only_restart():
    obs = dict(
        HEALTHY,
        transfer_failed={"prefill[0]": 3.0},
        transfer_failed_delta=1.0,
        e2e=[h("router[0]", "fail", "no response within 10s (read timeout)", "chat completion")],
        lineage=[
            h(
                "decode[0]",
                "fail",
                "restarted alone: pid 42 started 12:00",
                "restart lineage",
                hazard="degraded-bootstrap",
                prefill="prefill[0]",
            )
        ],
    )
    f = judge_triage(obs)
    assert kinds(f) == ["degraded-bootstrap"]
    assert f[0].severity == "action" and "restart --pair" in f[0].action
    assert any("transfer_failed +1" in o for o in f[0].observed)
    assert any("restarted alone" in o for o in f[0].observed)
    assert any("every worker's /health answered 200" in o for o in f[0].observed)
    # what was seen and what is concluded stay apart: the KV-bootstrap conclusion is only in `inferred`
    assert f[0].inferred and not any("degraded bootstrap" in o or "stale" in o for o in f[0].observed)
    assert any("degraded bootstrap" in i and "stale" in i for i in f[0].inferred)


def test_pinned_with_idle_decode_and_no_gpu():
    obs = dict(
        HEALTHY,
        inflight=inflight(
            "pinned",
            summary="num_prefill_inflight_queue_reqs=1 with NO decode progress",
            holders={"prefill[0]": {"sglang:num_prefill_inflight_queue_reqs": 1.0}},
        ),
        gpu_util={"gpu2": [0.0, 0.0]},
        gen_throughput={"decode[0]": 0.0},
    )
    f = judge_triage(obs)
    assert kinds(f) == ["pinned"] and f[0].severity == "action"
    text = " ".join(f[0].observed)
    assert "prefill[0] holds prefill_inflight_queue=1" in text and "GPU utilisation on gpu2: 0%, 0%" in text
    assert "restart --pair" in f[0].action and "logs" in f[0].action


def test_inconclusive_pin_is_only_a_warning():
    obs = dict(HEALTHY, inflight=inflight("pinned", conclusive=False, summary="x"))
    assert [f.severity for f in judge_triage(obs)] == ["warn"]


def test_busy_is_a_warning_never_a_pin():
    obs = dict(HEALTHY, inflight=inflight("busy", summary="progress"), generation_tokens_delta=500.0)
    f = judge_triage(obs)
    assert kinds(f) == ["busy"] and f[0].severity == "warn"


def test_lineage_hazard_without_failures_yet():
    obs = dict(
        HEALTHY,
        lineage=[h("decode[0]", "warn", "started 2h after prefill[0]", "restart lineage", hazard="degraded-bootstrap")],
    )
    f = judge_triage(obs)
    assert kinds(f) == ["lineage"] and f[0].severity == "warn"


def test_failures_without_lineage_point_to_logs():
    f = judge_triage(dict(HEALTHY, transfer_failed_delta=2.0))
    assert kinds(f) == ["transfer"] and "logs" in f[0].action


def test_old_failures_only_warn():
    f = judge_triage(dict(HEALTHY, transfer_failed={"prefill[0]": 10.0}))
    assert kinds(f) == ["transfer-history"] and f[0].severity == "warn"


def test_component_down_needs_action():
    obs = dict(HEALTHY, health=[h("decode[0]", "fail", "connection refused")])
    assert "health" in kinds(judge_triage(obs))


def test_a_change_under_way_is_said_first_and_only_warns():
    """Another operator's restart holds the lock: a worker it is restarting reads down; triage says so first, and
    the lock alone needs no action."""
    f = judge_triage(dict(HEALTHY, lock_holder="alice (restart, pid 7 on h1, for 12s)"))
    assert kinds(f) == ["lock-held"] and f[0].severity == "warn"
    assert "held by alice (restart, pid 7" in f[0].observed[0]
    down = judge_triage(dict(HEALTHY, lock_holder="alice (restart)", health=[h("decode[0]", "fail", "refused")]))
    assert kinds(down) == ["lock-held", "health"]


def test_a_wedged_worker_that_times_the_probe_out_is_not_called_a_transfer_failure():
    """decode's HTTP server wedged: its /health and the probe time out, no transfer failure is counted. The finding
    is the unhealthy component (with the probe as its evidence), not "KV transfers failing"."""
    probe = CheckResult(
        "e2e", "router[0]", "chat completion", Status.FAIL, observed="timed out after 8s", detail="no answer"
    )
    obs = dict(
        HEALTHY, health=[h("prefill[0]"), h("decode[0]", "fail", "timed out after 5s"), h("router[0]")], e2e=[probe]
    )
    f = judge_triage(obs)
    assert kinds(f) == ["health"], kinds(f)
    assert any("probe through router[0]: timed out" in line for line in f[0].observed)
    counted = judge_triage(dict(obs, transfer_failed_delta=2.0))  # a failure counted meanwhile: still said
    assert kinds(counted) == ["health", "transfer"]


def test_parse_gpu_util():
    # nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits: a GPU that cannot say prints [N/A]
    assert parse_gpu_util((FIXTURES / "nvidia-smi-utilization-gpu.csv").read_text()) == [87.0, 0.0, 100.0]
    assert parse_gpu_util("No devices were found\n") == []
    assert parse_gpu_util("") == []


# -- roles not running: observed from the service manager, never inferred from refused connections ----------------


def svc(active, role):
    return ServiceState(role, 0, f"pdctl-t-{role}-0", active, 7 if active else None, "")


def services(stopped=(), unknown=()):
    return {
        f"{r}[0]@local:{p}": svc(None if r in unknown else r not in stopped, r)
        for r, p in (("prefill", 30000), ("decode", 30002), ("router", 30001))
    }


def refused_everywhere(stopped):
    labels = {r: f"{r}[0]@local:{p}" for r, p in (("prefill", 30000), ("decode", 30002), ("router", 30001))}
    return dict(
        HEALTHY,
        health=[
            h(labels[r], "fail" if r in stopped else "pass", "connection refused" if r in stopped else "HTTP 200")
            for r in labels
        ],
        e2e=[h(labels["router"], "fail", "connection refused", "chat completion")],
        services=services(stopped),
        inflight=None,
        transfer_failed={},
        bootstrap_failed={},
        transfer_failed_delta=0.0,
        generation_tokens_delta=None,
    )


def test_all_stopped_is_one_not_running_finding_with_deploy():
    f = judge_triage(refused_everywhere({"prefill", "decode", "router"}))
    assert kinds(f) == ["not-running"]
    assert f[0].title == "not running: prefill[0], decode[0], router[0] (no process)"
    assert f[0].severity == "action" and "`pdctl deploy`" in f[0].action
    assert any("service pdctl-t-decode-0: not running (no process)" in o for o in f[0].observed)
    assert any("connection refused" in o for o in f[0].observed)  # the refusals are observed, explained
    assert "KV" not in f[0].title and "transfer" not in " ".join(x.kind for x in f)


def test_some_stopped_recommends_the_pair_restart():
    f = judge_triage(refused_everywhere({"decode"}))
    assert kinds(f) == ["not-running"]
    assert f[0].title == "not running: decode[0] (no process)"
    assert "pdctl restart --pair" in f[0].action and "deploy" not in f[0].action


def test_transfer_counters_of_running_workers_still_count_when_one_role_is_stopped():
    obs = dict(refused_everywhere({"router"}), transfer_failed={"prefill[0]": 2.0}, transfer_failed_delta=2.0)
    assert kinds(judge_triage(obs)) == ["not-running", "transfer"]


def test_unknown_status_is_not_judged_stopped():
    obs = dict(HEALTHY, health=[h("decode[0]", "fail", "connection refused")], services=services(unknown={"decode"}))
    assert kinds(judge_triage(obs)) == ["health"]


def test_running_services_change_nothing():
    assert judge_triage(dict(HEALTHY, services=services())) == []


def test_numbers_are_formatted_for_humans():
    obs = dict(HEALTHY, inflight=inflight("busy", summary="progress"), generation_tokens_delta=500.0, window_s=6.0)
    (f,) = judge_triage(obs)
    assert "decode generated 500 tokens over the 6.0s window" in f.observed


def test_headline_is_the_canonical_verdict_line():
    from pdctl.checks.triage import Finding
    from pdctl.ops.triage import TriageReport

    warn = Finding("x", "warn", [], [], "nothing")
    act = Finding("y", "action", [], [], "do")
    assert TriageReport("t", [], []).headline == "triage: HEALTHY: no finding needs action"
    assert TriageReport("t", [], [warn]).headline == "triage: WARNINGS (1 finding(s))"
    assert TriageReport("t", [], [warn, act]).headline == "triage: ACTION NEEDED (2 finding(s))"
    assert TriageReport("t", [], [act], partial=True).headline == "triage: INTERRUPTED (partial)"
    assert to_data(TriageReport("t", [], [act]))["headline"] == "triage: ACTION NEEDED (1 finding(s))"


def test_pinned_under_load_is_named_so_and_does_not_claim_an_idle_decode():
    pin = InflightSummary(
        "pinned",
        True,
        "pinned under load: the cross-side room balance held a median of 1 over 30.0s while traffic flowed",
        {"prefill[0]": {"sglang:num_prefill_inflight_queue_reqs": 2.0}},
        pinned_by="room-balance",
    )
    obs = dict(
        HEALTHY,
        inflight=pin,
        generation_tokens_delta=240.0,
        gen_throughput={"decode[0]": 8.0},
        gpu_util={"gpu2": [40.0]},
    )
    f = judge_triage(obs)
    assert kinds(f) == ["pinned"] and f[0].severity == "action"
    assert "while traffic flows" in f[0].title and "decode idle" not in f[0].title
    text = " ".join(f[0].observed)
    assert "room balance" in text and "prefill[0] holds prefill_inflight_queue=2" in text
    assert "gen_throughput" not in text and "GPU utilisation" not in text  # decode is busy: no idle evidence
    assert "restart --pair" in f[0].action


def canary(status, observed, prefill_ms=None, decode_ms=None, pair="prefill[0] -> decode[0]"):
    data = {"prefill": 0, "decode": 0, "prefill_ms": prefill_ms, "decode_ms": decode_ms}
    return CheckResult("pairs", pair, "canary", Status(status), observed=observed, data=data)


LONE_RESTART = [
    h(
        "decode[0]",
        "fail",
        "restarted alone under prefill[0]",
        "restart lineage",
        hazard="degraded-bootstrap",
        prefill="prefill[0]",
    )
]


def test_a_degraded_bootstrap_is_one_finding_with_the_race_ruled_out_by_how_transfers_end():
    """The issue's 3 a.m. case: the routers' breakers opened by the failing requests, the decode waiting out its
    timeout for KV the prefill already failed (a pin by the gauges), a canary answered with the failure in 19 ms.
    One finding (the degraded bootstrap), not three; the update_status race ruled out with the evidence."""
    obs = dict(
        HEALTHY,
        health=[
            h("prefill[0]"),
            h("decode[0]"),
            h("router[0]"),
            h("router[0]", "fail", "open", "breaker prefill[0] (http://127.0.0.1:30000)"),
            h("router[0]", "fail", "open", "breaker decode[0] (http://127.0.0.1:30002)"),
        ],
        e2e=[h("router[0]", "fail", "HTTP 503", "chat completion")],
        pairs=[canary("fail", "prefill: HTTP 500 KV transfer failed", prefill_ms=19.1, decode_ms=20.0)],
        lineage=LONE_RESTART,
        transfer_failed={"prefill[0]": 12.0},
        transfer_failed_delta=1.0,
        inflight=inflight(
            "pinned",
            summary="decode transfer queue 1 with no progress for 6s",
            holders={"decode[0]": {"sglang:num_decode_transfer_queue_reqs": 1.0}},
        ),
    )
    f = judge_triage(obs)
    assert kinds(f) == ["degraded-bootstrap"], [x.title for x in f]
    seen = " ".join(f[0].observed)
    assert "answered in 20 ms" in seen and "breaker prefill[0]: open" in seen and "decode[0] waits on 1" in seen
    (ruled,) = f[0].ruled_out
    assert ruled.startswith("the update_status race") and "in 20 ms" in ruled and "no prefill holds a room" in ruled
    assert any("SGLANG_DISAGGREGATION_WAITING_TIMEOUT" in i for i in f[0].inferred)


def test_a_prefill_holding_a_room_keeps_the_race_in_play():
    obs = dict(
        HEALTHY,
        pairs=[canary("fail", "prefill: HTTP 500 KV transfer failed", prefill_ms=19.1)],
        lineage=LONE_RESTART,
        transfer_failed_delta=1.0,
        inflight=inflight(
            "pinned", summary="pinned 6s", holders={"prefill[0]": {"sglang:num_prefill_inflight_queue_reqs": 1.0}}
        ),
    )
    f = judge_triage(obs)
    assert kinds(f) == ["pinned", "degraded-bootstrap"]  # two causes: each its finding
    assert f[1].ruled_out == []  # a held room: the race is not ruled out


def test_a_pin_rules_out_the_degraded_bootstrap_when_lineage_is_clean_and_nothing_fails():
    obs = dict(
        HEALTHY,
        pairs=[canary("pass", "200, KV 35 ms")],
        inflight=inflight(
            "pinned", summary="pinned 30s", holders={"prefill[0]": {"sglang:num_prefill_inflight_queue_reqs": 3.0}}
        ),
    )
    f = judge_triage(obs)
    assert kinds(f) == ["pinned"]
    assert f[0].ruled_out and f[0].ruled_out[0].startswith("a degraded bootstrap")


def test_a_canary_to_a_stopped_decode_is_the_stop_not_a_failing_transfer():
    obs = dict(
        refused_everywhere({"decode"}),
        pairs=[canary("fail", "decode: connection refused", prefill_ms=40.0)],
    )
    assert kinds(judge_triage(obs)) == ["not-running"]
