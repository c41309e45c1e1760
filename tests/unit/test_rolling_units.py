"""Unit formation and refusal of the rolling restart (pdctl.checks.rolling), and the judges of a router's worker
list."""

from __future__ import annotations

from pdctl.checks.rolling import back_in_service, drained, form_units, listed, refusal
from pdctl.ops.rolling import steps_of


def everyone(n_p: int, n_d: int) -> list[tuple[str, int]]:
    return [("prefill", i) for i in range(n_p)] + [("decode", j) for j in range(n_d)]


def test_units_split_the_decodes_in_two_halves_each_with_every_prefill():
    units = form_units(3, 5)
    assert [u.decodes for u in units] == [(0, 1, 2), (3, 4)]
    assert all(u.prefills == (0, 1, 2) for u in units)
    # every decode restarts exactly once, every prefill once per unit
    assert sorted(j for u in units for j in u.decodes) == [0, 1, 2, 3, 4]
    assert [u.name for u in units] == ["unit 1", "unit 2"]


def test_two_by_two_is_one_decode_a_unit():
    units = form_units(2, 2)
    assert [u.decodes for u in units] == [(0,), (1,)]
    assert units[0].members() == [("prefill", 0), ("prefill", 1), ("decode", 0)]


def test_a_single_decode_is_refused_naming_the_router():
    units = form_units(2, 1)
    why = refusal(units, {"router[0]@hostc:30001": everyone(2, 1)})
    assert why is not None and "decode[0]" in why and "router[0]@hostc:30001" in why and "no decode" in why


def test_a_single_prefill_is_refused():
    units = form_units(1, 2)
    why = refusal(units, {"router[0]@local:30001": everyone(1, 2)})
    assert why is not None and "prefill[0]" in why and "no prefill" in why


def test_two_by_two_is_allowed():
    assert refusal(form_units(2, 2), {"router[0]": everyone(2, 2), "router[1]": everyone(2, 2)}) is None


def test_refusal_reads_what_each_router_holds_now_not_the_inventory():
    # decode[1] is already out of router[1] (a previous rolling restart stopped): taking decode[0] out leaves none
    held = {"router[0]": everyone(2, 2), "router[1]": [("prefill", 0), ("prefill", 1), ("decode", 0)]}
    why = refusal(form_units(2, 2), held)
    assert why is not None and "router[1]" in why and "decode[0]" in why


def test_worker_list_judges():
    ws = [
        {"id": "a", "url": "http://10.0.0.1:30000/", "worker_type": "prefill", "is_healthy": True},
        {"id": "b", "url": "http://10.0.0.2:30002", "worker_type": "decode", "is_healthy": False},
    ]
    assert listed(ws, "http://10.0.0.1:30000")["id"] == "a"
    assert listed(ws, "http://10.0.0.1:30001") is None
    assert back_in_service(ws, "http://10.0.0.1:30000", "prefill")
    assert not back_in_service(ws, "http://10.0.0.1:30000", "decode")  # listed, but as the wrong type
    assert not back_in_service(ws, "http://10.0.0.2:30002", "decode")  # listed, but not healthy


def test_drained_means_every_inflight_gauge_zero():
    assert drained({"prefill_inflight_queue": 0, "prefill_bootstrap_queue": 0})
    assert not drained({"num_running_reqs": 1, "decode_transfer_queue": 0})


def test_steps_of_a_unit_counts_what_the_restart_does():
    # 2x2 unit: decode out, drained, restart, ready, back (5) + 2 prefills x 6 + the group canary
    assert steps_of(form_units(2, 2)[0]) == 18


def test_workers_to_restart_first_lead_the_units():
    # prefill[0] -> decode[1] broken: unit 1 takes decode[1] out, so decode[0] (sound) serves meanwhile
    units = form_units(2, 2, [("prefill", 0), ("decode", 1)])
    assert [u.decodes for u in units] == [(1,), (0,)]
    assert all(u.prefills == (0, 1) for u in units)
    units = form_units(3, 5, [("decode", 4), ("prefill", 2), ("decode", 3), ("prefill", 1)])
    assert [u.decodes for u in units] == [(0, 3, 4), (1, 2)]
    assert units[0].prefills == (1, 2, 0)


def test_more_first_decodes_than_half_fill_the_first_group_and_every_decode_restarts_once():
    units = form_units(2, 4, [("decode", 1), ("decode", 2), ("decode", 3)])
    assert [u.decodes for u in units] == [(1, 2), (0, 3)]
    assert sorted(j for u in units for j in u.decodes) == [0, 1, 2, 3]


def test_a_dead_decode_restarted_first_is_allowed_and_in_index_order_refused():
    # decode[1] dead (unhealthy in the router): taking decode[0] out first would leave no decode (an outage);
    # decode[1] first leaves decode[0] serving, and decode[1] serves again (restarted) when decode[0] goes out
    now = {"router[0]": [("prefill", 0), ("prefill", 1), ("decode", 0)]}
    why = refusal(form_units(2, 2), now)
    assert why is not None and "no decode" in why and "1 decode: decode[0]" in why
    assert refusal(form_units(2, 2, [("decode", 1)]), now) is None


def test_a_prefill_an_earlier_run_left_out_rolls_first_and_then_serves():
    # a stopped rolling restart left prefill[1] out: rolling prefill[0] first would leave no prefill
    now = {"router[0]": [("prefill", 0), ("decode", 0), ("decode", 1)]}
    assert "no prefill" in refusal(form_units(2, 2), now)
    assert refusal(form_units(2, 2, [("prefill", 1)]), now) is None
