from __future__ import annotations

from types import SimpleNamespace

import pytest

from pdctl.checks.lineage import judge_lineage, lone_restart_hazard, pair_hazards
from pdctl.checks.lineage_record import LineageRecord
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
    res = by_label(judge_lineage(starts, LineageRecord.of(starts), 900, now=NOW))
    assert all(r.status is Status.PASS and r.layer == "lineage" for r in res.values())
    assert res[P].observed.startswith("up 17h 0m (pid 100")
    assert res[P].data["uptime_s"] == 17 * H


def test_seed_decode_restarted_alone_against_long_running_prefill_is_fail():
    starts = co_started(NOW - 17 * H)
    record = LineageRecord.of(starts)
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
    record = LineageRecord.of(starts)
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
    record = LineageRecord.of(starts)
    starts[D] = ("decode", 201, starts[D][2])  # pid differs: a restart, whatever the start time says
    assert by_label(judge_lineage(starts, record, 900, now=NOW))[D].status is Status.FAIL


def test_start_time_jitter_within_tolerance_is_same_process():
    starts = co_started(NOW - H)
    record = LineageRecord.of(starts)
    starts[D] = ("decode", 200, starts[D][2] + 0.6)
    assert by_label(judge_lineage(starts, record, 900, now=NOW))[D].status is Status.PASS


def test_prefill_restarted_alone_flags_decode():
    starts = co_started(NOW - 5 * H)
    record = LineageRecord.of(starts)
    starts[P] = ("prefill", 999, NOW - 60)
    res = by_label(judge_lineage(starts, record, 900, now=NOW))
    assert res[D].status is Status.FAIL and res[D].data["hazard"] == "prefill-restarted-alone"
    assert res[R].status is Status.PASS  # flagged once, on the decode that holds the stale bootstrap
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
    starts[P] = ("prefill", 101, NOW - H)  # prefill younger than decode by 16 h
    assert by_label(judge_lineage(starts, None, 900, now=NOW))[D].status is Status.WARN


def test_all_restarted_outside_pdctl_falls_back_to_start_order():
    old = co_started(NOW - 17 * H)
    record = LineageRecord.of(old)
    starts = {P: ("prefill", 1, NOW - H), D: ("decode", 2, NOW - H + 90), R: ("router", 3, NOW - H + 200)}
    res = by_label(judge_lineage(starts, record, 900, now=NOW))
    assert res[D].status is Status.PASS and res[D].data["record_stale"]


def test_unknown_start_is_skip():
    starts = {P: ("prefill", 1, None), D: ("decode", 2, None)}
    res = judge_lineage(starts, None, 900, now=NOW)
    assert {r.status for r in res} == {Status.SKIP}
    assert by_label(res)[D].data == {"pid": 2, "start": None, "record": False}


@pytest.mark.parametrize(
    "restarted,running,hazard",
    [
        (["router"], ["prefill", "decode"], False),
        (["decode"], ["prefill"], True),
        (["decode", "router"], ["prefill"], True),
        (["prefill"], ["decode"], True),
        (["prefill", "router"], ["decode"], True),
        (["prefill", "decode"], [], False),
        (["prefill", "decode", "router"], [], False),
        (["decode"], [], False),  # nothing to pair with: no stale bootstrap
    ],
)
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
    record = LineageRecord.of(starts)
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


# -- per pair: N prefills x M decodes ---------------------------------------------------------------------------
P0, P1, P2 = "prefill[0]@hosta:30000", "prefill[1]@hosta:30010", "prefill[2]@hostb:30000"
D0, D1 = "decode[0]@hostc:30002", "decode[1]@hostc:30012"
R0 = "router[0]@hosta:30001"


def xpyd(t0, n_prefill=2):
    """n prefills then 2 decodes then a router, co-started from t0 (pdctl's order, within the window)."""
    starts = {p: ("prefill", 100 + k, t0 + k) for k, p in enumerate((P0, P1, P2)[:n_prefill])}
    starts.update({D0: ("decode", 200, t0 + 90), D1: ("decode", 201, t0 + 95), R0: ("router", 300, t0 + 180)})
    return starts


def pairs_of(result):
    return sorted((p["prefill"], p["decode"], p["hazard"]) for p in result.data.get("pairs", []))


def test_2x2_decode_restarted_under_two_long_running_prefills_names_both_pairs():
    starts = xpyd(NOW - 17 * H)
    record = LineageRecord.of(starts)
    starts[D1] = ("decode", 4242, NOW - 600)
    res = by_label(judge_lineage(starts, record, 900, now=NOW))
    d = res[D1]
    assert d.status is Status.FAIL
    assert d.observed == f"restarted alone under {P0}, {P1}"
    assert pairs_of(d) == [(P0, D1, "degraded-bootstrap"), (P1, D1, "degraded-bootstrap")]
    assert all(p["basis"] == "record" for p in d.data["pairs"])
    assert d.data["hazard"] == "degraded-bootstrap" and d.data["prefill"] == P0  # the first, as before
    assert "on these 2 pairs" in d.detail and "pid 4242" in d.detail and "pdctl restart --pair" in d.detail
    assert d.expected == "co-restarted with its prefills"
    assert res[D0].status is Status.PASS and "pairs" not in res[D0].data
    assert {res[x].status for x in (P0, P1, R0)} == {Status.PASS}
    hz = pair_hazards(starts, record, 900)
    assert [(h.prefill, h.decode, h.hazard, h.status) for h in hz] == [
        (P0, D1, "degraded-bootstrap", Status.FAIL),
        (P1, D1, "degraded-bootstrap", Status.FAIL),
    ]


def test_3x2_both_restarted_prefill_first_within_window_is_a_clean_pair():
    # prefill[2] then decode[0] restarted 90 s apart (the co-restart order): that pair is clean; decode[0] still
    # came back under prefill[0] and prefill[1], and prefill[2] restarted under decode[1]
    starts = xpyd(NOW - 17 * H, 3)
    record = LineageRecord.of(starts)
    starts[P2] = ("prefill", 900, NOW - 600)
    starts[D0] = ("decode", 901, NOW - 510)
    res = by_label(judge_lineage(starts, record, 900, now=NOW))
    assert pairs_of(res[D0]) == [(P0, D0, "degraded-bootstrap"), (P1, D0, "degraded-bootstrap")]
    assert res[D0].data["after_prefill_s"] == {P2: 90.0}  # judged from start times: the record is stale there
    assert pairs_of(res[D1]) == [(P2, D1, "prefill-restarted-alone")]
    assert res[D1].status is Status.FAIL and res[D1].observed == f"unchanged (pid 201) while {P2} restarted"
    assert P2 not in res[D0].observed


def test_3x2_both_restarted_prefill_after_decode_is_never_degraded_bootstrap():
    # decode[0] restarted, then prefill[2] 5 min later: prefill[2] is fresh (no stale peer for the new decode), so
    # the pair is not the degraded-bootstrap kind; but decode[0] ran on under the old prefill[2], the other kind
    # (what `pdctl restart --role prefill` refuses while a decode runs on), inferred from start times: WARN
    starts = xpyd(NOW - 17 * H, 3)
    record = LineageRecord.of(starts)
    starts[D0] = ("decode", 901, NOW - 600)
    starts[P2] = ("prefill", 900, NOW - 300)
    hz = {(h.prefill, h.decode): h for h in pair_hazards(starts, record, 900)}
    assert hz[(P2, D0)].hazard == "prefill-restarted-alone" and hz[(P2, D0)].status is Status.WARN
    assert hz[(P2, D0)].basis == "start times" and hz[(P2, D0)].after_prefill_s == -300.0
    assert {k: h.hazard for k, h in hz.items() if k != (P2, D0)} == {
        (P0, D0): "degraded-bootstrap",
        (P1, D0): "degraded-bootstrap",
        (P2, D1): "prefill-restarted-alone",
    }
    d0 = by_label(judge_lineage(starts, record, 900, now=NOW))[D0]
    assert d0.status is Status.FAIL  # the worst of its pairs: the record shows it restarted under prefill[0/1]
    assert d0.observed == f"restarted alone under {P0}, {P1}; started 5m 0s BEFORE {P2}"
    assert d0.data["record_stale"] is True and "on these 2 pairs" in d0.detail


def test_both_restarted_prefill_long_before_decode_is_degraded_bootstrap_from_start_times():
    starts = xpyd(NOW - 17 * H, 1)
    record = LineageRecord.of(starts)
    starts[P0] = ("prefill", 900, NOW - 3 * H)
    starts[D0] = ("decode", 901, NOW - H)  # 2 h after the new prefill: not a co-restart
    hz = pair_hazards(starts, record, 900)
    assert [(h.prefill, h.decode, h.hazard, h.basis) for h in hz] == [
        (P0, D0, "degraded-bootstrap", "start times"),
        (P0, D1, "prefill-restarted-alone", "record"),
    ]


def test_prefill_restarted_alone_is_a_hazard_on_its_pairs_with_every_running_decode():
    starts = xpyd(NOW - 5 * H, 3)
    record = LineageRecord.of(starts)
    starts[P1] = ("prefill", 999, NOW - 60)
    res = by_label(judge_lineage(starts, record, 900, now=NOW))
    for d in (D0, D1):
        assert res[d].status is Status.FAIL and pairs_of(res[d]) == [(P1, d, "prefill-restarted-alone")]
        assert res[d].data["prefill"] == P1 and res[d].observed.endswith(f"while {P1} restarted")
    assert res[R0].status is Status.PASS and "NOT the process recorded" in res[P1].detail


def test_without_record_start_time_rules_per_pair():
    t0 = NOW - 17 * H
    starts = {
        P0: ("prefill", 1, t0),
        P1: ("prefill", 2, t0 + 3 * H),
        D0: ("decode", 3, t0 + 90),
        D1: ("decode", 4, t0 + 5 * H),
        R0: ("router", 5, t0 + 5 * H + 60),
    }
    res = by_label(judge_lineage(starts, None, 900, now=NOW))
    # decode[0]: co-started with prefill[0], but started 3 h BEFORE prefill[1] (prefill[1] restarted under it)
    assert res[D0].status is Status.WARN and pairs_of(res[D0]) == [(P1, D0, "prefill-restarted-alone")]
    assert res[D0].observed == f"started 2h 58m BEFORE {P1}"
    # decode[1]: started long after both prefills: came back under each of them
    assert pairs_of(res[D1]) == [(P0, D1, "degraded-bootstrap"), (P1, D1, "degraded-bootstrap")]
    assert res[D1].observed == f"started 5h 0m after {P0}, 2h 0m after {P1}"
    assert res[D1].expected == "started after its prefills, within 15m 0s" and "start times only" in res[D1].detail
    assert res[R0].status is Status.PASS and all(p["basis"] == "start times" for p in res[D1].data["pairs"])
    # a clean xPyD co-start has no pair hazard at all
    assert pair_hazards(xpyd(t0, 3), None, 900) == []


def test_xpyd_texts_fit_80_columns_with_every_label_whole(monkeypatch, capsys):
    from pdctl import render
    from pdctl.ops.verify import HealthReport

    starts = xpyd(NOW - 17 * H, 3)
    record = LineageRecord.of(starts)
    starts[D0] = ("decode", 4242, NOW - 600)
    monkeypatch.setenv("COLUMNS", "80")
    render.health_report(HealthReport("x", {"lineage": judge_lineage(starts, record, 900, now=NOW)}))
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines), lines
    assert "…" not in "\n".join(lines)
    for label in (P0, P1, P2, D0):
        assert any(label in line for line in lines), (label, lines)
