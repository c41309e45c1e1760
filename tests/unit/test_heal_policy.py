"""The watch's heal decision (pdctl.checks.heal): the known cases, the smallest action, every guard."""

from __future__ import annotations

from pdctl.checks.heal import HealPolicy, HealView, budget_exhausted, decide
from pdctl.checks.heal_ledger import HealLedger, HealRun

P = HealPolicy(pin_confirm_s=60, pair_failures=3, max_per_hour=2)
NONE = HealLedger()  # no heal so far


def view(**kw) -> HealView:
    base = dict(pinned_for_s=None, pair_failures={}, lineage_hazards=[], unknown=[], n_prefill=2, n_decode=2)
    base.update(kw)
    return HealView(**base)


def test_nothing_to_heal():
    d = decide(view(pair_failures={(0, 1): 2}), P, ledger=NONE, now=1000)
    assert d.case is None and not d.act


def test_a_pin_seen_long_enough_is_healed_with_a_pair_restart_even_on_xpyd():
    assert decide(view(pinned_for_s=59), P, ledger=NONE, now=1000).case is None
    d = decide(view(pinned_for_s=61), P, ledger=NONE, now=1000)
    assert d.act and d.case == "pinned" and d.action == "restart --pair"  # a pinned room never drains
    assert d.pairs == []


def test_a_pair_broken_k_times_on_xpyd_gets_the_rolling_restart():
    d = decide(view(pair_failures={(0, 1): 3, (1, 1): 1}), P, ledger=NONE, now=1000)
    assert d.act and d.case == "pair-broken" and d.action == "restart --rolling"
    assert "prefill[0] -> decode[1]" in d.reason and "prefill[1]" not in d.reason
    assert d.pairs == [(0, 1)]  # what the rolling restart takes first


def test_broken_pair_with_the_lineage_hazard_is_the_degraded_bootstrap():
    d = decide(
        view(pair_failures={(0, 1): 4}, lineage_hazards=[(0, 1, "degraded-bootstrap"), (1, 1, "degraded-bootstrap")]),
        P,
        ledger=NONE,
        now=1000,
    )
    assert d.act and d.case == "degraded-bootstrap" and "prefill[0] -> decode[1]" in d.reason
    assert d.pairs == [(0, 1)]


def test_the_degraded_bootstrap_is_confirmed_by_one_failed_canary():
    d = decide(
        view(pair_failures={(0, 1): 1}, lineage_hazards=[(0, 1, "degraded-bootstrap")]),
        P,
        ledger=NONE,
        now=1000,
    )
    assert d.act and d.case == "degraded-bootstrap"
    # without the lineage's reason, one failure is not enough
    assert decide(view(pair_failures={(0, 1): 1}), P, ledger=NONE, now=1000).case is None


def test_a_hazard_whose_canaries_pass_is_not_healed():
    d = decide(view(lineage_hazards=[(0, 0, "degraded-bootstrap")]), P, ledger=NONE, now=1000)
    assert d.case is None


def test_one_by_one_gets_the_pair_restart():
    d = decide(view(pair_failures={(0, 0): 3}, n_prefill=1, n_decode=1), P, ledger=NONE, now=1000)
    assert d.act and d.action == "restart --pair"


def test_never_acts_while_a_target_is_unknown():
    d = decide(view(pinned_for_s=300, unknown=["decode[0]@hostb:30002"]), P, ledger=NONE, now=1000)
    assert d.case == "pinned" and not d.act and "decode[0]@hostb:30002" in d.refused and "unknown" in d.refused


def test_never_acts_after_a_red_heal():
    red = HealLedger((900.0,), HealRun("r1", 900.0, "failed", "red"))
    d = decide(view(pinned_for_s=300), P, ledger=red, now=1000)
    assert not d.act and "final-health is red" in d.refused and d.guard == "red"
    assert "re-arms" in d.refused  # the refusal says what lifts it


def test_a_lock_held_by_an_operator_is_waited_for_and_an_unread_lock_is_unknown():
    d = decide(view(pinned_for_s=300), P, ledger=NONE, now=1000, lock_holder="alice (restart --pair, pid 7 on h1)")
    assert not d.act and d.guard == "lock" and "held by alice" in d.refused
    d = decide(view(pinned_for_s=300), P, ledger=NONE, now=1000, lock_unread="ssh gpu-1: timed out")
    assert not d.act and d.guard == "lock unread" and "gpu-1" in d.refused
    # the red guard and the budget speak first: the lock would not change them
    red = HealLedger((900.0,), HealRun("r1", 900.0, "failed", "red"))
    assert decide(view(pinned_for_s=300), P, ledger=red, now=1000, lock_holder="alice").guard == "red"


def test_an_unreadable_audit_log_stops_every_heal():
    d = decide(view(pinned_for_s=300), P, ledger=HealLedger().with_unreadable("audit log /x: a FIFO"), now=1000)
    assert not d.act and d.guard == "ledger" and "audit log /x" in d.refused


def test_never_acts_while_healing():
    d = decide(view(pinned_for_s=300), P, ledger=NONE, now=1000, healing=True)
    assert not d.act and "still running" in d.refused


def test_the_budget_per_hour_then_it_stops_and_recovers_after_the_hour():
    heals = (100.0, 2000.0)
    d = decide(view(pinned_for_s=300), P, ledger=HealLedger(heals), now=3000)
    assert (
        not d.act
        and "budget spent (2 in the last hour, at most 2)" in d.refused
        and "next allowed in 700s" in d.refused
    )
    assert budget_exhausted(heals, 3000, P)
    assert d.guard == "budget"  # said once: its "next allowed in" changes every round, the guard does not
    later = decide(view(pinned_for_s=300), P, ledger=HealLedger(heals), now=3701)
    assert later.act and not budget_exhausted(heals, 3701, P)


def test_the_budget_refusal_says_which_heals_it_left_out_for_being_dated_ahead():
    """The clock stepped back: a heal dated a day ahead spends nothing, and the budget's refusal says so."""
    ledger = HealLedger(heals_at=(900.0, 950.0), ahead=(1000 + 86400.0,))
    d = decide(view(pinned_for_s=61), P, ledger=ledger, now=1000)
    assert d.guard == "budget" and "ahead of this clock" in d.refused, d.refused
    assert "ahead" not in decide(view(pinned_for_s=61), P, ledger=HealLedger(heals_at=(900.0, 950.0)), now=1000).refused
