"""What a stopped rolling restart left each worker as (issue 28, C1): the words of the interrupt message, the stopped
run's screen and the audit record come from each worker's Progress, moved before the action it names can begin;
a SIGTERM mid-run names a worker "restarted" only when its restart ended ready, and says which were untouched."""

from __future__ import annotations

from pdctl.checks.rolling import Unit, UnitState, form_units
from pdctl.checks.rolling_progress import Progress, last_progress, left_lines, still_out
from pdctl.role_ref import RoleRef
from pdctl.serialize import to_data

P0, P1, D0, D1 = RoleRef("prefill", 0), RoleRef("prefill", 1), RoleRef("decode", 0), RoleRef("decode", 1)


def label(role: str, k: int) -> str:
    return f"{role}[{k}]@h:{30000 + k}"


def test_a_sigterm_while_a_prefill_restarts_names_it_restart_begun_and_the_rest_precisely():
    """The reproduction: SIGTERM in unit 1 while prefill[0] was being restarted (its old process may be stopped);
    decode[0] was out and never restarted, so it was put back. Before, the message said prefill[0] "restarted, not
    put back" and said nothing of decode[0], prefill[1] and decode[1]."""
    u1, u2 = (UnitState(u) for u in form_units(2, 2))
    u1.workers.update({D0: Progress.PUT_BACK, P0: Progress.RESTARTING})
    lines = left_lines([u1.workers, u2.workers], label)
    assert lines == [
        "restart begun, not finished (stopped, or not ready: see its state): prefill[0]@h:30000",
        "taken out, never restarted, put back: decode[0]@h:30000",
        "untouched: prefill[1]@h:30001, decode[1]@h:30001",
    ]
    assert not any(line.startswith("restarted") for line in lines)
    assert still_out([u1.workers, u2.workers]) == [P0]


def test_a_prefill_back_in_unit_1_and_rolling_again_in_unit_2_is_said_as_it_ends():
    """The variant: unit 1 done (every prefill and decode[0] back); SIGTERM in unit 2 after prefill[0] restarted
    and before its canary passed, while prefill[1] waits its turn: prefill[0] is out (restarted, not canaried),
    prefill[1] was restarted in unit 1 and is back, decode[1] was taken out and put back."""
    u1, u2 = (UnitState(u) for u in form_units(2, 2))
    u1.workers.update({P0: Progress.BACK, P1: Progress.BACK, D0: Progress.BACK})
    u2.workers.update({D1: Progress.PUT_BACK, P0: Progress.RESTARTED})
    ends = last_progress([u1.workers, u2.workers])
    assert ends == {P0: Progress.RESTARTED, P1: Progress.BACK, D0: Progress.BACK, D1: Progress.PUT_BACK}
    assert left_lines([u1.workers, u2.workers], label) == [
        "restarted and back in the routers: prefill[1]@h:30001, decode[0]@h:30000",
        "restarted, not put back (its canary did not pass): prefill[0]@h:30000",
        "taken out, never restarted, put back: decode[1]@h:30001",
    ]
    assert still_out([u1.workers, u2.workers]) == [P0]


def test_a_worker_the_router_would_not_take_back_is_out_and_said_so():
    u = UnitState(Unit(0, (0,), (0, 1)))
    u.workers.update({D0: Progress.OUT, P0: Progress.CANARIED})
    assert u.still_out() == [P0, D0]
    assert left_lines([u.workers], label)[:2] == [
        "restarted and canaried, not put back: prefill[0]@h:30000",
        "taken out, never restarted, not put back: decode[0]@h:30000",
    ]


def test_a_units_json_says_each_members_progress_by_short_label():
    u = UnitState(Unit(0, (1,), (1, 0)))
    u.workers[D1] = Progress.RESTARTING
    doc = to_data(u)
    assert doc["workers"] == {"prefill[1]": "untouched", "prefill[0]": "untouched", "decode[1]": "restarting"}
    assert doc["out_of_routers"] == []  # `out` is what the op recorded when the unit stopped, not a guess
