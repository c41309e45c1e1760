"""The watch's heal decision (pdctl.checks.heal): the known cases, the smallest action, every guard."""

from __future__ import annotations

from pdctl.checks.heal import HealPolicy, HealView, budget_exhausted, decide

P = HealPolicy(pin_confirm_s=60, pair_failures=3, max_per_hour=2)


def view(**kw) -> HealView:
    base = dict(pinned_for_s=None, pair_failures={}, lineage_hazards=[], unknown=[], n_prefill=2, n_decode=2)
    base.update(kw)
    return HealView(**base)


def test_nothing_to_heal():
    d = decide(view(pair_failures={(0, 1): 2}), P, heals_at=[], now=1000, last_heal_ok=None)
    assert d.case is None and not d.act


def test_a_pin_seen_long_enough_is_healed_with_a_pair_restart_even_on_xpyd():
    assert decide(view(pinned_for_s=59), P, heals_at=[], now=1000, last_heal_ok=None).case is None
    d = decide(view(pinned_for_s=61), P, heals_at=[], now=1000, last_heal_ok=None)
    assert d.act and d.case == "pinned" and d.action == "restart --pair"  # a pinned room never drains
    assert d.pairs == []


def test_a_pair_broken_k_times_on_xpyd_gets_the_rolling_restart():
    d = decide(view(pair_failures={(0, 1): 3, (1, 1): 1}), P, heals_at=[], now=1000, last_heal_ok=True)
    assert d.act and d.case == "pair-broken" and d.action == "restart --rolling"
    assert "prefill[0] -> decode[1]" in d.reason and "prefill[1]" not in d.reason
    assert d.pairs == [(0, 1)]  # what the rolling restart takes first


def test_broken_pair_with_the_lineage_hazard_is_the_degraded_bootstrap():
    d = decide(
        view(pair_failures={(0, 1): 4}, lineage_hazards=[(0, 1, "degraded-bootstrap"), (1, 1, "degraded-bootstrap")]),
        P,
        heals_at=[],
        now=1000,
        last_heal_ok=None,
    )
    assert d.act and d.case == "degraded-bootstrap" and "prefill[0] -> decode[1]" in d.reason
    assert d.pairs == [(0, 1)]


def test_the_degraded_bootstrap_is_confirmed_by_one_failed_canary():
    d = decide(
        view(pair_failures={(0, 1): 1}, lineage_hazards=[(0, 1, "degraded-bootstrap")]),
        P,
        heals_at=[],
        now=1000,
        last_heal_ok=None,
    )
    assert d.act and d.case == "degraded-bootstrap"
    # without the lineage's reason, one failure is not enough
    assert decide(view(pair_failures={(0, 1): 1}), P, heals_at=[], now=1000, last_heal_ok=None).case is None


def test_a_hazard_whose_canaries_pass_is_not_healed():
    d = decide(view(lineage_hazards=[(0, 0, "degraded-bootstrap")]), P, heals_at=[], now=1000, last_heal_ok=None)
    assert d.case is None


def test_one_by_one_gets_the_pair_restart():
    d = decide(view(pair_failures={(0, 0): 3}, n_prefill=1, n_decode=1), P, heals_at=[], now=1000, last_heal_ok=None)
    assert d.act and d.action == "restart --pair"


def test_never_acts_while_a_target_is_unknown():
    d = decide(view(pinned_for_s=300, unknown=["decode[0]@hostb:30002"]), P, heals_at=[], now=1000, last_heal_ok=None)
    assert d.case == "pinned" and not d.act and "decode[0]@hostb:30002" in d.refused and "unknown" in d.refused


def test_never_acts_after_a_red_heal():
    d = decide(view(pinned_for_s=300), P, heals_at=[900], now=1000, last_heal_ok=False)
    assert not d.act and "final-health is red" in d.refused


def test_never_acts_while_healing():
    d = decide(view(pinned_for_s=300), P, heals_at=[], now=1000, last_heal_ok=None, healing=True)
    assert not d.act and "still running" in d.refused


def test_the_budget_per_hour_then_it_stops_and_recovers_after_the_hour():
    heals = [100.0, 2000.0]
    d = decide(view(pinned_for_s=300), P, heals_at=heals, now=3000, last_heal_ok=True)
    assert (
        not d.act
        and "budget spent (2 in the last hour, at most 2)" in d.refused
        and "next allowed in 700s" in d.refused
    )
    assert budget_exhausted(heals, 3000, P)
    later = decide(view(pinned_for_s=300), P, heals_at=heals, now=3701, last_heal_ok=True)
    assert later.act and not budget_exhausted(heals, 3701, P)
