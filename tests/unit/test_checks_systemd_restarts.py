"""The judge of systemd's own restarts (NRestarts) in the lineage layer. Live: tests/e2e/test_systemd_hosts.py."""

from __future__ import annotations

from pdctl.checks.result import Status
from pdctl.checks.systemd_restarts import UnitRestarts, judge_systemd_restarts

T0 = 1_700_000_000.0


def _units(decode_restarts=0, prefill_restarts=0, router_restarts=0, *, decode_start=T0 + 600, prefill_start=T0):
    return {
        "prefill[0]@gpu1:30000": UnitRestarts(
            "prefill", "sglang-dsv4-prefill.service", prefill_restarts, 101, prefill_start
        ),
        "decode[0]@gpu1:30002": UnitRestarts(
            "decode", "sglang-dsv4-decode.service", decode_restarts, 202, decode_start
        ),
        "router[0]@gpu1:30001": UnitRestarts("router", "sglang-dsv4-router.service", router_restarts, 303, T0 + 5),
    }


def _by_target(results):
    return {r.target: r for r in results}


def test_no_restarts_pass_one_row_per_unit():
    results = judge_systemd_restarts(_units())
    assert [r.status for r in results] == [Status.PASS] * 3
    assert all(r.layer == "lineage" and r.name == "systemd restarts" for r in results)
    assert results[1].observed == "NRestarts=0 on sglang-dsv4-decode.service"


def test_decode_restarted_by_systemd_under_a_running_prefill_fails_naming_unit_and_count():
    r = _by_target(judge_systemd_restarts(_units(decode_restarts=3)))["decode[0]@gpu1:30002"]
    assert r.status == Status.FAIL
    assert "NRestarts=3 on sglang-dsv4-decode.service" in r.observed and "3 times" in r.observed
    assert "prefill[0]@gpu1:30000" in r.detail and "restart --pair" in r.detail
    assert r.next_step and "restart --pair" in r.next_step
    assert r.data["hazard"] == "systemd-restarted-alone" and r.data["restarts"] == 3


def test_prefill_restarted_by_systemd_under_a_running_decode_fails_too():
    results = _by_target(judge_systemd_restarts(_units(prefill_restarts=1, prefill_start=T0 + 900)))
    assert results["prefill[0]@gpu1:30000"].status == Status.FAIL
    assert "once" in results["prefill[0]@gpu1:30000"].observed
    assert results["decode[0]@gpu1:30002"].status == Status.PASS


def test_restarts_before_the_pair_started_are_not_the_hazard():
    # decode was restarted by systemd, then the prefill started later (a co-restart of prefill first is not it,
    # but a prefill that started after the decode's last restart leaves no stale peer in the decode's view)
    r = _by_target(judge_systemd_restarts(_units(decode_restarts=2, decode_start=T0, prefill_start=T0 + 60)))
    assert r["decode[0]@gpu1:30002"].status == Status.PASS
    assert "started after it" in r["decode[0]@gpu1:30002"].detail


def test_a_router_restarted_by_systemd_is_reported_not_failed():
    r = _by_target(judge_systemd_restarts(_units(router_restarts=4)))["router[0]@gpu1:30001"]
    assert r.status == Status.PASS and "NRestarts=4" in r.observed and "no KV bootstrap state" in r.detail


def test_start_times_within_the_tolerance_are_the_same_start():
    r = _by_target(judge_systemd_restarts(_units(decode_restarts=1, decode_start=T0 + 1)))
    assert r["decode[0]@gpu1:30002"].status == Status.PASS
