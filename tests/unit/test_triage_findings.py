"""Pure triage logic: findings from observations, observed vs inferred, the action, nvidia-smi parsing."""

from __future__ import annotations

from pdctl.ops.triage import judge_triage, parse_gpu_util


def h(target, status="pass", observed="HTTP 200", name="/health", **data):
    return {"target": target, "status": status, "observed": observed, "name": name, "detail": "", "data": data}


HEALTHY = {"health": [h("prefill[0]"), h("decode[0]"), h("router[0]")],
           "e2e": [h("router[0]", observed="HTTP 200 in 40 ms, 8 tokens", name="chat completion")],
           "lineage": [h("decode[0]", observed="unchanged since the last co-restart", name="restart lineage")],
           "inflight": {"verdict": "drained", "conclusive": True, "summary": "all PD queues 0 for 6s"},
           "transfer_failed": {"prefill[0]": 0.0}, "bootstrap_failed": {"prefill[0]": 0.0},
           "transfer_failed_delta": 0.0, "bootstrap_failed_delta": 0.0, "generation_tokens_delta": 0.0,
           "gpu_util": {"local": None}, "window_s": 6}


def kinds(findings):
    return [f.kind for f in findings]


def test_healthy_has_no_finding():
    assert judge_triage(HEALTHY) == []


def test_degraded_bootstrap_after_decode_only_restart():
    obs = dict(HEALTHY, transfer_failed={"prefill[0]": 3.0}, transfer_failed_delta=1.0,
               e2e=[h("router[0]", "fail", "no response within 10s (read timeout)", "chat completion")],
               lineage=[h("decode[0]", "fail", "restarted alone: pid 42 started 12:00", "restart lineage",
                          hazard="degraded-bootstrap", prefill="prefill[0]")])
    f = judge_triage(obs)
    assert kinds(f) == ["degraded-bootstrap"]
    assert f[0].severity == "action" and "restart --pair" in f[0].action
    assert any("transfer_failed +1" in o for o in f[0].observed)
    assert any("restarted alone" in o for o in f[0].observed)
    assert any("every /health answered 200" in o for o in f[0].observed)
    assert f[0].inferred and all("restarted" not in o or "inferred" not in o for o in f[0].observed)


def test_pinned_with_idle_decode_and_no_gpu():
    obs = dict(HEALTHY, inflight={"verdict": "pinned", "conclusive": True,
                                  "summary": "num_prefill_inflight_queue_reqs=1 with NO decode progress",
                                  "holders": {"prefill[0]": {"sglang:num_prefill_inflight_queue_reqs": 1.0}}},
               gpu_util={"gpu2": [0.0, 0.0]}, gen_throughput={"decode[0]": 0.0})
    f = judge_triage(obs)
    assert kinds(f) == ["pinned"] and f[0].severity == "action"
    text = " ".join(f[0].observed)
    assert "prefill[0] holds prefill_inflight_queue=1" in text and "GPU utilisation on gpu2: 0%, 0%" in text
    assert "restart --pair" in f[0].action and "logs" in f[0].action


def test_inconclusive_pin_is_only_a_warning():
    obs = dict(HEALTHY, inflight={"verdict": "pinned", "conclusive": False, "summary": "x", "holders": {}})
    assert [f.severity for f in judge_triage(obs)] == ["warn"]


def test_busy_is_a_warning_never_a_pin():
    obs = dict(HEALTHY, inflight={"verdict": "busy", "conclusive": True, "summary": "progress"},
               generation_tokens_delta=500.0)
    f = judge_triage(obs)
    assert kinds(f) == ["busy"] and f[0].severity == "warn"


def test_lineage_hazard_without_failures_yet():
    obs = dict(HEALTHY, lineage=[h("decode[0]", "warn", "started 2h after prefill[0]", "restart lineage",
                                   hazard="degraded-bootstrap")])
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


def test_parse_gpu_util():
    assert parse_gpu_util("87\n 0\nNo devices were found\n") == [87.0, 0.0]
    assert parse_gpu_util("") == []
