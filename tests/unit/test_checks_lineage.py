from __future__ import annotations

from pdctl.checks.lineage import judge_lineage, make_lineage_record
from pdctl.checks.result import Status

NOW = 1_800_000_000.0
H = 3600.0
P, D, R = "prefill[0]@local:30000", "decode[0]@local:30002", "router[0]@local:30001"


def co_started(t0):
    return {P: ("prefill", 100, t0), D: ("decode", 200, t0 + 95), R: ("router", 300, t0 + 180)}


def by_label(res):
    return {r.target: r for r in res}


def test_clean_co_restart_with_record_passes_and_reports_prefill_uptime():
    starts = co_started(NOW - 17 * H)
    res = by_label(judge_lineage(starts, make_lineage_record(starts), 900, now=NOW))
    assert all(r.status is Status.PASS and r.layer == "lineage" for r in res.values())
    assert res[P].observed.startswith("up 17h 0m (pid 100")
    assert res[P].data["uptime_s"] == 17 * H


def test_seed_decode_restarted_alone_against_long_running_prefill_is_fail():
    starts = co_started(NOW - 17 * H)
    record = make_lineage_record(starts)
    starts[D] = ("decode", 4242, NOW - 600)  # the A/B restarts of the seed
    res = by_label(judge_lineage(starts, record, 900, now=NOW))
    d = res[D]
    assert d.status is Status.FAIL and "pdctl restart --pair" in d.detail
    assert "observed:" in d.detail and "inferred:" in d.detail and "degraded-bootstrap" in d.detail
    assert d.data["hazard"] == "degraded-bootstrap" and "up 17h" in d.detail
    assert res[R].status is Status.PASS and res[P].status is Status.PASS


def test_router_restarted_alone_is_fail_too_and_new_pid_same_start_counts():
    starts = co_started(NOW - 2 * H)
    record = make_lineage_record(starts)
    starts[R] = ("router", 301, NOW - 2 * H + 180)  # pid reuse is impossible to miss: pid differs
    assert by_label(judge_lineage(starts, record, 900, now=NOW))[R].status is Status.FAIL


def test_start_time_jitter_within_tolerance_is_same_process():
    starts = co_started(NOW - H)
    record = make_lineage_record(starts)
    starts[D] = ("decode", 200, starts[D][2] + 0.6)
    assert by_label(judge_lineage(starts, record, 900, now=NOW))[D].status is Status.PASS


def test_prefill_restarted_alone_flags_decode():
    starts = co_started(NOW - 5 * H)
    record = make_lineage_record(starts)
    starts[P] = ("prefill", 999, NOW - 60)
    res = by_label(judge_lineage(starts, record, 900, now=NOW))
    assert res[D].status is Status.FAIL and res[D].data["hazard"] == "prefill-restarted-alone"
    assert res[R].status is Status.WARN
    assert "NOT the process recorded" in res[P].detail


def test_without_record_window_rule():
    starts = co_started(NOW - 17 * H)
    res = by_label(judge_lineage(starts, None, 900, now=NOW))
    assert res[D].status is Status.PASS and "no co-restart record" in res[D].detail
    starts[D] = ("decode", 201, NOW - 600)
    res = by_label(judge_lineage(starts, None, 900, now=NOW))
    assert res[D].status is Status.WARN and "pdctl restart --pair" in res[D].detail
    assert "start times only" in res[D].detail and res[D].data["hazard"] == "degraded-bootstrap"
    starts = co_started(NOW - 17 * H)
    starts[P] = ("prefill", 101, NOW - H)   # prefill younger than decode by 16 h
    assert by_label(judge_lineage(starts, None, 900, now=NOW))[D].status is Status.WARN


def test_all_restarted_outside_pdctl_falls_back_to_start_order():
    old = co_started(NOW - 17 * H)
    record = make_lineage_record(old)
    starts = {P: ("prefill", 1, NOW - H), D: ("decode", 2, NOW - H + 90), R: ("router", 3, NOW - H + 200)}
    res = by_label(judge_lineage(starts, record, 900, now=NOW))
    assert res[D].status is Status.PASS and res[D].data["record_stale"]


def test_unknown_start_is_skip_and_wrapped_record_accepted():
    starts = {P: ("prefill", 1, None), D: ("decode", 2, None)}
    assert {r.status for r in judge_lineage(starts, None, 900, now=NOW)} == {Status.SKIP}
    starts = co_started(NOW - H)
    res = judge_lineage(starts, {"time": NOW - H, "roles": make_lineage_record(starts)}, 900, now=NOW)
    assert all(r.status is Status.PASS for r in res)
