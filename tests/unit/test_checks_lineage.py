from __future__ import annotations

from types import SimpleNamespace

import pytest

from pdctl.checks.lineage import judge_lineage, lone_restart_hazard, make_lineage_record
from pdctl.checks.result import Status
from pdctl.errors import HazardRefused
from pdctl.inventory import embedded_default
from pdctl.ops.restart import hazard_of, restart

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


def test_router_restarted_alone_passes_it_holds_no_kv_bootstrap_state():
    # what `restart --role router` leaves: the record of the last co-restart, prefill and decode unchanged, the
    # router a new pid started long after them (the issue: restart allowed it, then its final-health failed it)
    starts = co_started(NOW - 2 * H)
    record = make_lineage_record(starts)
    starts[R] = ("router", 301, NOW - 60)
    res = by_label(judge_lineage(starts, record, 900, now=NOW))
    assert {r.status for r in res.values()} == {Status.PASS}
    assert "restarted alone" in res[R].observed and "no KV bootstrap state" in res[R].detail
    assert "hazard" not in res[R].data
    # same without a record: started 2 h after the prefill is no hazard for a router
    res = by_label(judge_lineage(starts, None, 900, now=NOW))
    assert {r.status for r in res.values()} == {Status.PASS}


def test_decode_with_new_pid_same_start_counts_as_restarted():
    starts = co_started(NOW - 2 * H)
    record = make_lineage_record(starts)
    starts[D] = ("decode", 201, starts[D][2])  # pid differs: a restart, whatever the start time says
    assert by_label(judge_lineage(starts, record, 900, now=NOW))[D].status is Status.FAIL


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
    assert res[R].status is Status.PASS      # flagged once, on the decode that holds the stale bootstrap
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


@pytest.mark.parametrize("restarted,running,hazard", [
    (["router"], ["prefill", "decode"], False),
    (["decode"], ["prefill"], True),
    (["decode", "router"], ["prefill"], True),
    (["prefill"], ["decode"], True),
    (["prefill", "router"], ["decode"], True),
    (["prefill", "decode"], [], False),
    (["prefill", "decode", "router"], [], False),
    (["decode"], [], False),                 # nothing to pair with: no stale bootstrap
])
def test_lone_restart_hazard(restarted, running, hazard):
    assert (lone_restart_hazard(restarted, running) is not None) is hazard


def _dep(active=True):
    """What hazard_of reads: the inventory and each role's status (all running unless told)."""
    return SimpleNamespace(inv=embedded_default(), status=lambda role, i: SimpleNamespace(active=active))


def test_restart_and_lineage_hold_one_rule():
    dep = _dep()
    # restart allows a router alone, and lineage passes what that restart leaves
    assert hazard_of(dep, ("router",)) is None
    assert restart(dep, roles=("router",), dry_run=True).warnings == []
    starts = co_started(NOW - 2 * H)
    record = make_lineage_record(starts)
    starts[R] = ("router", 301, NOW - 30)
    assert all(r.status is Status.PASS for r in judge_lineage(starts, record, 900, now=NOW))
    # restart refuses a decode alone, and lineage flags what an overridden one leaves
    with pytest.raises(HazardRefused) as e:
        restart(dep, roles=("decode",), dry_run=True)
    assert "prefill[0]" in e.value.message and "decode restarted without prefill" in e.value.message
    assert e.value.exit_code == 4
    starts = co_started(NOW - 2 * H)
    starts[D] = ("decode", 201, NOW - 30)
    assert by_label(judge_lineage(starts, record, 900, now=NOW))[D].status is Status.FAIL
    # and decode with the router, or prefill with the router, are refused too; nothing running: allowed
    for roles in (("decode", "router"), ("prefill", "router"), ("prefill",)):
        assert hazard_of(dep, roles) is not None, roles
    assert hazard_of(_dep(active=False), ("decode",)) is None
