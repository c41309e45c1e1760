"""Counters raise suspicion, a canary decides (issue 27): what makes the watch run its pairs round at once, how
soon, and what its timeline says. The Watch's follow-up is driven with a fake clock, no host."""

from __future__ import annotations

from types import SimpleNamespace

from pdctl.checks.result import CheckResult, Status
from pdctl.checks.watch_events import CanaryAsked
from pdctl.inventory import WatchSettings
from pdctl.ops import watch as watch_op
from pdctl.ops.watch_rounds import Seen

P0, D0 = "prefill[0]@a:30000", "decode[0]@b:30002"
ZERO = {"transfer_failed": 0, "bootstrap_failed": 0}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _watch() -> tuple[watch_op.Watch, Clock]:
    dep = SimpleNamespace(inv=SimpleNamespace(name="d", watch=WatchSettings(), source="<embedded default>"))
    clock = Clock()
    w = watch_op.Watch(dep, clock=clock, wall=clock)
    for c in w.clocks.values():  # every cadence just ran: nothing due for a period
        c.next_due = clock.now + c.every
    return w, clock


def test_a_rise_of_failures_asks_for_the_pairs_round_at_once_and_says_why_once():
    w, clock = _watch()
    pairs = w.clocks["pairs"]
    w.state.apply_counters({P0: ZERO}, clock.now)
    assert w.follow_up("inflight", Seen()) == [] and pairs.wait_s(clock.now) == 30
    clock.now += 1
    w.state.apply_counters({P0: {**ZERO, "transfer_failed": 2}}, clock.now)
    lines = w.follow_up("inflight", Seen())
    assert lines == [CanaryAsked(clock.now, "d", f"KV failures counted on {P0}")]
    assert pairs.wait_s(clock.now) == 0
    assert w.follow_up("inflight", Seen()) == []  # the same failures: asked already
    # a pairs round began; more failures right after it: asked again, but not closer than CONFIRM_S to it
    w.started_at["pairs"], w._pairs_began = clock.now, clock.now
    pairs.next_due = clock.now + 30
    clock.now += 1
    w.state.apply_counters({P0: {**ZERO, "transfer_failed": 3}}, clock.now)
    assert w.follow_up("inflight", Seen()) == []  # said within the minute: no second line
    assert pairs.wait_s(clock.now) == watch_op.CONFIRM_S - 1


def test_a_failed_pair_is_canaried_again_soon_until_confirmed_and_the_lineage_read_now():
    w, clock = _watch()
    pairs, flags = w.clocks["pairs"], w.clocks["flags"]
    for n in (1, 2):
        w.state.apply_pairs([(P0, D0, "fail", None)], clock.now)
        w.follow_up("pairs", Seen())
        assert pairs.wait_s(clock.now) == watch_op.CONFIRM_S and flags.wait_s(clock.now) == 0
        pairs.next_due, flags.next_due = clock.now + 30, clock.now + 60
    w.state.apply_pairs([(P0, D0, "fail", None)], clock.now)  # the third: confirmed broken, the period again
    w.follow_up("pairs", Seen())
    assert pairs.wait_s(clock.now) == 30 and w.state.pairs[(P0, D0)].consecutive_failures == 3


def test_a_failed_router_canary_and_a_breaker_that_opens_ask_too():
    w, clock = _watch()
    failed = CheckResult("e2e", "router[0]@c:30001", "chat completion", Status.FAIL)
    assert w.follow_up("e2e", Seen(checks=[failed]))[0].why == "the router's canary failed"
    w.clocks["pairs"].next_due = clock.now + 30
    opened = CheckResult("health", "router[0]@c:30001", "breaker decode[0]", Status.FAIL, observed="open")
    lines = w.follow_up("health", Seen(checks=[opened]))
    assert lines[0].why == "a router breaker opened (router[0]@c:30001: breaker decode[0])"
    w.clocks["pairs"].next_due = clock.now + 30
    assert w.follow_up("health", Seen(checks=[opened])) == []  # still open: not a new reason to ask
    assert w.clocks["pairs"].wait_s(clock.now) == 30
