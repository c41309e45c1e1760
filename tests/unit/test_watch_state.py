"""The watch's pure state (checks/watch_state.py), its counters across resets and its cadence clock; the exporter
built from that state (series removed while unknown), the `watch:` inventory settings and --listen's refusal."""

from __future__ import annotations

import pytest

from pdctl.checks.inflight import Point
from pdctl.checks.result import CheckResult, Status
from pdctl.checks.watch_counters import CounterTrack
from pdctl.checks.watch_schedule import RUN, SKIP, CadenceClock
from pdctl.checks.watch_events import CheckChanged, LineageChanged, Restarted, RoundError, RoundSkipped, TargetChanged
from pdctl.checks.watch_state import WatchState

DECODE = "decode[0]@local:30002"
PREFILL = "prefill[0]@local:30000"


def _health(status: Status, target: str = DECODE) -> CheckResult:
    return CheckResult(
        "health",
        target,
        "/health",
        status,
        observed="HTTP 200" if status is Status.PASS else "connection refused",
        expected="HTTP 200",
    )


def test_counter_reset_is_a_restart_and_the_total_carries_on():
    c = CounterTrack()
    assert c.observe(5) is False and c.total == 0  # the first read is the baseline
    assert c.observe(7) is False and c.total == 2
    assert c.observe(1) is True and c.total == 3  # restarted: the new process counted 1
    assert c.observe(None) is False and c.total == 3  # not read: nothing changes
    assert c.observe(4) is False and c.total == 6 and c.resets == 1


def test_state_counters_say_restart_and_the_failures_do_not_jump():
    st = WatchState("d", started=0.0)
    st.apply_counters({DECODE: {"transfer_failed": 2, "bootstrap_failed": 0, "generation_tokens": 900}}, 1)
    st.apply_counters({DECODE: {"transfer_failed": 3, "bootstrap_failed": 0, "generation_tokens": 950}}, 2)
    lines = st.apply_counters({DECODE: {"transfer_failed": 0, "bootstrap_failed": 0, "generation_tokens": 10}}, 3)
    assert [(type(x), x.target) for x in lines] == [(Restarted, DECODE)]
    assert lines[0].to_line() == {
        "t": 3,
        "deployment": "d",
        "event": "restart",
        "target": DECODE,
        "observed": "counter reset: transfer_failed, generation_tokens",
    }
    assert st.failures_since_start() == {(DECODE, "transfer"): 1.0, (DECODE, "bootstrap"): 0.0}
    st.apply_counters({DECODE: {"transfer_failed": 0, "bootstrap_failed": 0, "generation_tokens": 20}}, 400)
    # what the old process failed does not stand against the new one, even once no canary decided it
    checks = {c.name: c.status for c in st.transfer_checks()}
    assert checks == {"transfer failures": Status.PASS, "bootstrap failures": Status.PASS}
    st.apply_counters({DECODE: {"transfer_failed": 1, "bootstrap_failed": 0, "generation_tokens": 30}}, 401)
    st.apply_counters({DECODE: {"transfer_failed": 1, "bootstrap_failed": 0, "generation_tokens": 40}}, 600)
    checks = {c.name: c.status for c in st.transfer_checks()}  # the new process's failure: no canary decided it
    assert checks == {"transfer failures": Status.FAIL, "bootstrap failures": Status.PASS}


def test_unknown_then_recovered():
    st = WatchState("d", started=0.0)
    first = st.apply_checks("health", [_health(Status.PASS)], 1)
    assert [(x.target, x.status) for x in first] == [(DECODE, Status.PASS)]  # one line per check at start
    assert first[0].to_line() == {
        "t": 1,
        "deployment": "d",
        "cadence": "health",
        "layer": "health",
        "target": DECODE,
        "check": "/health",
        "status": "pass",
        "observed": "HTTP 200",
        "expected": "HTTP 200",
    }
    assert st.apply_checks("health", [_health(Status.PASS)], 2) == []  # no change, no line
    lines = st.apply_checks("health", [], 3, unknown={DECODE: "unknown: host gpu2 did not answer"})
    assert {(type(x), x.status) for x in lines} == {(TargetChanged, "unknown"), (CheckChanged, Status.UNKNOWN)}
    target = next(x for x in lines if isinstance(x, TargetChanged))
    assert target.to_line() == {
        "t": 3,
        "deployment": "d",
        "event": "target",
        "target": DECODE,
        "status": "unknown",
        "observed": "unknown: host gpu2 did not answer",
    }
    assert st.target_up[DECODE] is False
    assert st.checks[("health", DECODE, "/health")].status is Status.UNKNOWN  # never fail
    assert st.verdict() is Status.UNKNOWN and st.exit_code() == 3
    back = st.apply_checks("health", [_health(Status.PASS)], 4)
    assert {(type(x), x.status) for x in back} == {(TargetChanged, "recovered"), (CheckChanged, Status.PASS)}
    recovered = next(x for x in back if isinstance(x, TargetChanged))  # no why: no "observed" key
    assert recovered.to_line() == {
        "t": 4,
        "deployment": "d",
        "event": "target",
        "target": DECODE,
        "status": "recovered",
    }
    assert st.target_up[DECODE] is True and st.exit_code() == 0


def test_a_failing_check_is_fail_not_unknown_and_since_is_kept():
    st = WatchState("d", started=0.0)
    st.apply_checks("health", [_health(Status.FAIL)], 1)
    st.apply_checks("health", [_health(Status.FAIL)], 5)
    c = st.checks[("health", DECODE, "/health")]
    assert c.status == "fail" and c.since == 1 and st.exit_code() == 1 and st.target_up[DECODE] is True


def _point(t: float, inflight: float, gen: float) -> Point:
    gauges = {"sglang:num_prefill_inflight_queue_reqs": inflight}
    return Point(
        t=t,
        gauges=gauges,
        generation_tokens=gen,
        per_worker={PREFILL: gauges},
        counters={DECODE: {"transfer_failed": 0, "bootstrap_failed": 0, "generation_tokens": gen}},
        gen_throughput={},
    )


def test_pin_starts_when_progress_stopped_and_ends_when_it_moves():
    st = WatchState("d", started=1000.0, inflight_window_s=4)
    for k in range(3):  # progress, then a room stays with no progress from t=2
        st.apply_point(_point(k, 1, 100 + 10 * min(k, 2)), 1000 + k)
    assert not st.pinned
    for k in range(3, 7):
        st.apply_point(_point(k, 1, 120), 1000 + k)
    assert st.pinned and st.pin_started == 1002.0  # when progress last moved, not when it was seen
    assert st.pinned_seconds(1010) == 8.0
    assert st.checks[("inflight", "prefill+decode", "inflight")].status == "fail"
    st.apply_point(_point(7, 1, 130), 1007)  # decode moved: no longer pinned
    assert not st.pinned and st.pinned_seconds(1010) == 0.0 and st.busy
    for k in range(8, 60):
        st.apply_point(_point(k, 1, 130 + k), 1000 + k)
    # the samples slide: the longer of the queue window (4 s) and the room balance's (30 s), plus an anchor
    assert 30 <= len(st.points) <= 32 and st.points[0].t >= 59 - 31


def test_consecutive_pair_failures_and_unknown_neither_breaks_nor_extends():
    st = WatchState("d", started=0.0)
    key = (PREFILL, DECODE)
    for status in ("fail", "fail", "unknown", "fail"):
        st.apply_pairs([(PREFILL, DECODE, status, 0.05)], 1)
    assert st.pairs[key].consecutive_failures == 3 and st.pairs[key].status == "fail"
    st.apply_pairs([(PREFILL, DECODE, "pass", 0.02)], 2)
    assert st.pairs[key].consecutive_failures == 0 and st.pairs[key].latency_s == 0.02


def test_lineage_hazard_appears_and_clears_once_each():
    st = WatchState("d", started=0.0)
    appear = st.apply_hazards({(PREFILL, DECODE): "degraded-bootstrap"}, 1)
    assert [x.to_line() for x in appear] == [
        {
            "t": 1,
            "deployment": "d",
            "event": "lineage",
            "prefill": PREFILL,
            "decode": DECODE,
            "hazard": "degraded-bootstrap",
            "status": "hazard",
        }
    ]
    assert st.apply_hazards({(PREFILL, DECODE): "degraded-bootstrap"}, 2) == []
    cleared = st.apply_hazards({}, 3)
    assert [(type(x), x.status, x.hazard) for x in cleared] == [(LineageChanged, "cleared", "degraded-bootstrap")]


def test_a_process_restart_is_seen_by_its_pid():
    st = WatchState("d", started=0.0)
    assert st.apply_processes({DECODE: (100, 5.0)}, 1) == []
    lines = st.apply_processes({DECODE: (200, 9.0)}, 2)
    assert isinstance(lines[0], Restarted) and lines[0].observed == "pid 100 -> 200"


def test_slow_round_skips_its_tick_never_piles_up():
    c = CadenceClock("e2e", every=5)
    assert c.tick(0) == RUN
    assert c.tick(1) is None  # not due
    assert c.tick(5) == SKIP and c.skipped == 1  # due, but the first round still runs
    assert c.tick(6) is None  # the skipped tick is not queued while the round runs
    assert c.tick(10) == SKIP and c.skipped == 2
    c.finished()
    # one tick is owed, at most: due the moment the slow round ends (a 30.04 s round every 30 s keeps its pace)
    assert c.tick(12) == RUN and c.next_due == 17
    c.finished()
    assert c.tick(13) is None and c.tick(17) == RUN
    c.finished()
    assert c.tick(100) == RUN and c.next_due == 105  # far behind: from now, not a burst of catch-up rounds
    st = WatchState("d", started=0.0)
    line = st.round_skipped("e2e", 7)
    assert isinstance(line, RoundSkipped) and line.cadence == "e2e" and st.rounds["e2e"].skipped == 1
    assert line.to_line() == {
        "t": 7,
        "deployment": "d",
        "event": "skip",
        "cadence": "e2e",
        "observed": "its previous round still runs: this tick was skipped",
    }


def test_round_done_records_the_last_complete_round():
    st = WatchState("d", started=0.0)
    st.apply_checks("health", [_health(Status.FAIL)], 1)
    line = st.round_done("health", 2.0, 0.25)
    assert line.to_line() == {
        "t": 2.0,
        "deployment": "d",
        "event": "round",
        "cadence": "health",
        "ok": False,
        "seconds": 0.25,
    }
    assert st.rounds["health"].last_complete == 2.0


def test_exporter_removes_the_series_of_an_unknown_target():
    from prometheus_client import CollectorRegistry, generate_latest

    from pdctl.inventory import embedded_default
    from pdctl.ops.context import Deployment
    from pdctl.ops.watch import Watch
    from pdctl.ops.watch_exporter import WatchCollector

    with Deployment(embedded_default()) as dep:
        w = Watch(dep)
        decode = dep.inv.label("decode", 0)
        w.state.apply_checks("health", [_health(Status.FAIL, decode)], 1)
        reg = CollectorRegistry(auto_describe=False)
        reg.register(WatchCollector(w))
        text = generate_latest(reg).decode()
        assert f'pdctl_check_ok{{check="/health",deployment="local",layer="health",target="{decode}"}} 0.0' in text
        w.state.apply_checks("health", [], 2, unknown={decode: "unknown: no answer"})
        text = generate_latest(reg).decode()
        assert "pdctl_check_ok{" not in text
        assert f'pdctl_target_up{{deployment="local",target="{decode}"}} 0.0' in text


def test_watch_settings_defaults_and_errors_name_the_field():
    from pdctl.errors import InventoryError
    from pdctl.inventory import embedded_default, parse_inventory

    inv = embedded_default()
    assert (
        inv.watch.health_every,
        inv.watch.inflight_interval,
        inv.watch.inflight_window,
        inv.watch.e2e_every,
        inv.watch.pairs_every,
        inv.watch.flags_every,
        inv.watch.listen,
    ) == (5, 1, 20, 30, 30, 60, "127.0.0.1:9464")
    data = inv.dump()
    for bad, field in (
        ({"listen": "9464"}, "watch.listen"),
        ({"e2e_every": 0}, "watch.e2e_every"),
        ({"inflight_interval": 30}, "watch.inflight_interval: 30 must be at most inflight_window 20"),
    ):
        with pytest.raises(InventoryError) as e:
            parse_inventory({**data, "watch": bad}, "inv.yaml")
        assert field in e.value.message


def test_listen_refuses_a_non_loopback_address_without_listen_any():
    from pdctl.cli.watch import exporter_address
    from pdctl.errors import UsageError

    assert exporter_address("127.0.0.1:9464", False) == ("127.0.0.1", 9464)
    assert exporter_address("[::1]:9", False) == ("::1", 9)
    with pytest.raises(UsageError, match="not a loopback address"):
        exporter_address("0.0.0.0:9464", False)
    assert exporter_address("0.0.0.0:9464", True) == ("0.0.0.0", 9464)
    with pytest.raises(UsageError, match="--listen"):
        exporter_address("nope", False)


P0, D0 = "prefill[0]@a:30000", "decode[0]@b:30002"
ZERO = {"transfer_failed": 0, "bootstrap_failed": 0, "aborted": 0}


def _checks(st: WatchState) -> dict[tuple[str, str], CheckResult]:
    return {(c.target, c.name): c for c in st.transfer_checks()}


def test_failures_stand_or_not_by_the_canary_that_follows_them():
    """Counters raise suspicion, a canary decides: an abort storm's failures are explained by a canary that passes
    after them; a broken pair's by nothing, aborts around them or not (its clients time out and abort too)."""
    st = WatchState("d", started=0.0)
    st.apply_counters({P0: ZERO, D0: ZERO}, 1)
    storm = {P0: {**ZERO, "transfer_failed": 3, "aborted": 5}, D0: {**ZERO, "transfer_failed": 1, "aborted": 6}}
    st.apply_counters(storm, 2)
    assert st.failures.suspects() == [D0, P0] and st.failures.newest_pending() == 2
    assert all(c.status is Status.PASS for c in _checks(st).values())  # suspect, not failed
    assert _checks(st)[(P0, "transfer failures")].observed == "3 awaiting a canary"
    st.apply_pairs([(P0, D0, "pass", 0.05)], 5, started=3)
    got = _checks(st)[(P0, "transfer failures")]
    assert got.status is Status.PASS
    assert got.observed == "3 explained: a canary through its pairs passed after them"
    assert st.unexplained_failures() == {k: 0 for k in st.unexplained_failures()}
    # the seed's degraded bootstrap: failures, with the clients' aborts around them, and the canary fails
    broken = {P0: {**ZERO, "transfer_failed": 9, "aborted": 12}, D0: {**ZERO, "transfer_failed": 1, "aborted": 6}}
    st.apply_counters(broken, 10)
    st.apply_pairs([(P0, D0, "fail", None)], 12, started=10)
    assert st.unexplained_failures()[(P0, "transfer")] == 6
    got = _checks(st)[(P0, "transfer failures")]
    assert got.status is Status.FAIL and got.observed.startswith("6 a canary did not explain")
    assert st.pairs[(P0, D0)].consecutive_failures == 1 and st.unconfirmed_failures()


def test_a_canary_decides_only_the_failures_counted_before_it_started():
    st = WatchState("d", started=0.0)
    st.apply_counters({P0: ZERO, D0: ZERO}, 0)
    st.apply_counters({P0: {**ZERO, "transfer_failed": 1}, D0: ZERO}, 5)
    st.apply_counters({P0: {**ZERO, "transfer_failed": 2}, D0: ZERO}, 9)
    st.apply_pairs([(P0, D0, "fail", None)], 10, started=7)  # began between the two
    assert st.unexplained_failures()[(P0, "transfer")] == 1 and st.failures.pending_count((P0, "transfer")) == 1
    st.apply_pairs([(P0, D0, "unknown", None)], 20, started=15)  # an unknown canary decides nothing
    assert st.failures.pending_count((P0, "transfer")) == 1
    st.apply_pairs([(P0, D0, "pass", 0.1)], 30, started=25)
    assert st.failures.pending_count((P0, "transfer")) == 0 and st.failures.explained[(P0, "transfer")] == 1


def test_no_canary_in_time_lets_failures_stand_and_the_window_ends_them():
    st = WatchState("d", started=0.0)
    st.apply_counters({P0: ZERO}, 0)
    st.apply_counters({P0: {**ZERO, "bootstrap_failed": 2}}, 1)
    st.apply_counters({P0: {**ZERO, "bootstrap_failed": 2}}, 1 + st.failures.decide_within_s + 1)
    assert st.unexplained_failures()[(P0, "bootstrap")] == 2
    st.apply_counters({P0: {**ZERO, "bootstrap_failed": 2}}, 1 + st.failures.window_s + 1)
    assert st.unexplained_failures()[(P0, "bootstrap")] == 0  # seen long enough: the alert resolves
    assert st.failures_since_start()[(P0, "bootstrap")] == 2  # the raw count is still exported as it is


def test_a_canary_through_a_worker_that_is_not_serving_is_unknown_and_a_heal_forgets_the_failures():
    from pdctl.ops.heal import forget_evidence

    st = WatchState("d", started=0.0)
    st.apply_checks("health", [CheckResult("health", D0, "/health", Status.FAIL, observed="refused")], 1)
    st.apply_pairs([(P0, D0, "fail", None)], 2)
    assert st.pairs[(P0, D0)].status is Status.UNKNOWN and st.pairs[(P0, D0)].consecutive_failures == 0
    assert not st.serving(D0) and st.serving(P0)
    st.apply_checks("health", [CheckResult("health", D0, "/health", Status.PASS)], 3)
    st.apply_counters({P0: ZERO}, 3)
    st.apply_counters({P0: {**ZERO, "transfer_failed": 4}}, 4)
    st.apply_pairs([(P0, D0, "fail", None)], 6, started=5)
    assert st.unexplained_failures()[(P0, "transfer")] == 4 and st.pairs[(P0, D0)].consecutive_failures == 1
    forget_evidence(st)
    assert st.unexplained_failures()[(P0, "transfer")] == 0 and st.pairs[(P0, D0)].consecutive_failures == 0


def test_a_round_that_raises_reads_unknown_and_once_still_ends(monkeypatch):
    """--once with a round that raises something other than a usage error: the watch ends (it used to retry that
    cadence for ever), the verdict is unknown (exit 3) naming the round, and a later good round clears it."""
    from types import SimpleNamespace

    from pdctl.inventory import WatchSettings
    from pdctl.ops import watch as watch_op
    from pdctl.ops.watch_rounds import Seen
    from pdctl.render.watch_screen import screen_text

    calls = {"pairs": 0}

    def broken(_dep):
        calls["pairs"] += 1
        raise RuntimeError("a bug in the pairs round")

    rounds = {name: (lambda _dep: Seen()) for name in watch_op.ROUNDS}
    rounds["pairs"] = broken
    monkeypatch.setattr(watch_op, "ROUNDS", rounds)
    settings = WatchSettings(
        health_every=0.05,
        inflight_interval=0.05,
        inflight_window=0.1,
        e2e_every=0.05,
        pairs_every=0.05,
        flags_every=0.05,
    )
    dep = SimpleNamespace(inv=SimpleNamespace(name="d", watch=settings, source="<embedded default>"))
    lines = []
    w = watch_op.Watch(dep, on_lines=[lines.extend])
    result = w.run(once=True, for_s=20)
    assert result.seconds < 20 and calls["pairs"] == 1  # ended by --once, not by --for; not retried
    assert result.exit_code() == 3 and w.state.verdict() == "unknown"
    assert w.state.round_errors() == {"pairs": "round raised RuntimeError: a bug in the pairs round"}
    assert any(isinstance(line, RoundError) and line.cadence == "pairs" for line in lines)
    text = screen_text(w.state, w.state.started).plain
    assert text.startswith("watch d: UNKNOWN  0 failing, 1 unknown")
    assert "unknown the pairs round: round raised RuntimeError: a bug in the pairs round" in text
    assert w.state.snapshot(w.state.started).round_errors == {"pairs": w.state.round_errors()["pairs"]}
    w.state.round_done("pairs", 1.0, 0.1)
    assert w.state.round_errors() == {} and w.state.verdict() == "pass"


def test_an_interrupted_watch_is_not_ok_whatever_it_saw():
    from pdctl.ops.watch import WatchResult

    st = WatchState("d", started=0.0)
    st.round_done("health", 1.0, 0.1)
    assert st.exit_code() == 0
    assert WatchResult("d", 5.0, state=st).ok
    stopped = WatchResult("d", 5.0, stopped_by="SIGTERM", state=st)
    assert stopped.exit_code() == 130 and not stopped.ok


def test_a_watch_that_ended_before_any_round_is_unknown_never_a_pass():
    """`watch --for 1e-6` on a failing deployment said PASS, exit 0: it had looked at nothing."""
    from pdctl.ops.watch import WatchResult

    st = WatchState("d", started=0.0)
    assert st.verdict() == "unknown" and st.exit_code() == 3
    assert not WatchResult("d", 0.0, state=st).ok
    st.round_done("flags", 1.0, 0.1)
    assert st.verdict() == "pass" and st.exit_code() == 0


def test_a_worker_whose_metrics_cannot_be_read_on_a_live_host_fails_and_on_a_silent_host_is_unknown():
    """Issue 28 W5: decode[1] read once, then its /metrics stop answering (SIGSTOP) while its host answers: the
    inflight round judges it failed as final-health does (checks.transfer.judge_unread), its last pass not kept;
    decode[2], whose host stopped answering meanwhile, is an unknown target. Read again: judged again."""
    from types import SimpleNamespace

    from pdctl.checks.transfer import judge_unread
    from pdctl.inventory import WatchSettings
    from pdctl.ops.watch import Watch
    from pdctl.ops.watch_rounds import Seen

    d1, d2 = "decode[1]@b:30012", "decode[2]@c:30022"
    inv = SimpleNamespace(name="d", watch=WatchSettings(), source="<embedded default>")
    w = Watch(SimpleNamespace(inv=inv))
    zero = {"transfer_failed": 0.0, "bootstrap_failed": 0.0, "aborted": 0.0}

    def point(t: float, counters: dict, errors: dict) -> Point:
        return Point(t, {}, 0.0, {}, counters, {}, errors=errors)

    w.apply("inflight", Seen(point=point(1, {d1: zero}, {})), 1)
    assert {c.status for c in w.state.checks.values() if c.layer == "transfer"} == {Status.PASS}
    unread = {d1: "cannot read /metrics of decode[1]@b:30012: no response within 5s", d2: "timed out"}
    seen = Seen(
        point=point(2, {}, unread),
        checks=[judge_unread(d1, unread[d1])],
        unknown={d2: "unknown: host c did not answer: timed out"},
    )
    w.apply("inflight", seen, 2)
    transfer = {(c.target, c.check): c.status for c in w.state.checks.values() if c.layer == "transfer"}
    assert transfer == {(d1, "/metrics"): Status.FAIL}, transfer  # its stale passes are gone
    assert w.state.unknown_targets() == [d2] and w.state.exit_code() == 1
    w.apply("inflight", Seen(point=point(3, {d1: zero, d2: zero}, {})), 3)
    transfer = {(c.target, c.check): c.status for c in w.state.checks.values() if c.layer == "transfer"}
    assert set(transfer.values()) == {Status.PASS} and (d1, "/metrics") not in transfer, transfer
    assert w.state.unknown_targets() == []


def test_a_failure_outranks_an_unknown_in_the_exit_code_as_in_final_health():
    """A dead decode on a host that answers fails its /health while its metrics cannot be read (unknown): the watch
    exits 1 as final-health does, not 3."""
    st = WatchState("d", started=0.0)
    prefill = "prefill[0]@gpu1:30000"
    st.apply_checks("health", [_health(Status.FAIL)], 1)
    st.apply_checks("health", [_health(Status.PASS, prefill)], 1, unknown={prefill: "unknown: metrics unreadable"})
    assert st.verdict() is Status.FAIL and st.exit_code() == 1
