"""Router membership in `pdctl status` (issue 28, W7): a running worker that a router does not route to (out of its
worker list after an interrupted or killed `restart --rolling`, or listed draining or unhealthy) is named in the
headline, its row and a line under the table, with the co-restart `restart --rolling`'s own messages advise, and
status exits 1; a router whose host cannot be asked leaves it unknown (3), never "all running". And a router that
does not answer its worker API (W13): a failure when its host answers, unknown only when the host cannot be asked.
The worker lists are the shapes smg 1.13 and sglang-router 0.3.2 answer (tests/e2e/test_rolling_restart.py reads
them from the real routers)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from pdctl.checks.result import Status
from pdctl.checks.role_status import RoleStatus, co_restart_advice, co_restart_command, status_exit_code
from pdctl.checks.rolling import PAIR_COMMAND, ROLLING_COMMAND, least_disruptive_co_restart
from pdctl.checks.router_membership import NotRouted, RouterList, judge_membership, why_not_routed
from pdctl.checks.router_state import judge_unanswered_api
from pdctl.errors import ExitCode, StepFailed, UnreachableError
from pdctl.ops.router_workers import unanswered
from pdctl.render.status import routing_lines, status_headline, status_rows
from pdctl.serialize import to_data
from pdctl.services.base import ServiceStatus

R0 = "router[0]@r:30001"
URL = {
    "prefill": ["http://127.0.0.1:31000", "http://127.0.0.1:31001"],
    "decode": ["http://127.0.0.1:32000", "http://127.0.0.1:32001"],
}


def smg_entry(role: str, k: int, **over) -> dict:
    entry = {"id": f"{role}-{k}", "url": URL[role][k], "worker_type": role, "is_healthy": True, "status": "ready"}
    return {**entry, **over}


def row(role: str, k: int, routing=None, active: bool = True) -> RoleStatus:
    label = f"{role}[{k}]@h:{3000 + k}" if role != "router" else R0
    return RoleStatus(
        label, role, k, "h", f"pdctl-x-{role}-{k}", active, pid=100 + k if active else None, routing=routing
    )


def rows_after(lists: list[RouterList]) -> list[RoleStatus]:
    """A 2x2 and its router, each running worker judged against `lists` (router label -> what it lists)."""
    out = []
    for role in ("prefill", "decode"):
        for k in range(2):
            out.append(row(role, k, judge_membership(role, {rl.router: URL[role][k] for rl in lists}, lists)))
    return out + [row("router", 0)]


def test_a_killed_rolling_restart_leaves_a_decode_out_and_status_says_so_exit_1():
    """The reproduction: kill -9 during `decode[0] out of the routers`: the router lists 3 of 4 workers (decode[0]
    drained away), every service runs. Before: "status: 5 of 5 running", exit 0."""
    listed = [smg_entry("prefill", 0), smg_entry("prefill", 1), smg_entry("decode", 1)]
    rows = rows_after([RouterList(R0, tuple(listed))])
    assert [r.routed for r in rows] == [True, True, False, True, None]
    assert rows[2].routing.missing == (NotRouted(R0, "not in its worker list"),)
    assert status_exit_code(rows) == ExitCode.CHECK_FAILED
    head = status_headline(rows)
    assert head.plain == "status: 5 of 5 running; not routed to: decode[0]" and "green" not in str(head.style)
    assert status_rows(rows)[2][5] == "router[0]: not in its worker list"
    lines = routing_lines(rows)
    assert lines[0].startswith(f"{R0} does not route to decode[0] (not in its worker list)")
    assert lines[-1].startswith(f"next: `{ROLLING_COMMAND}` restarts these workers first")  # as the rolling says
    doc = to_data(rows[2])
    assert doc["routing"] == {
        "missing": [{"router": R0, "why": "not in its worker list"}],
        "unread": [],
        "routed": False,
    }
    assert "routing" not in to_data(rows[4])  # a router row has no membership of its own


def test_listed_but_draining_or_unhealthy_is_not_routed_to_either():
    """The variant: the kill landed after smg accepted the DELETE (it lists the decode `draining` for ~5 s), and a
    prefill the router calls unhealthy (sglang-router's only word for it)."""
    listed = [
        smg_entry("prefill", 0),
        {"id": "p1", "url": URL["prefill"][1], "worker_type": "prefill", "is_healthy": False},
        smg_entry("decode", 0, status="draining", is_healthy=False),
        smg_entry("decode", 1),
    ]
    rows = rows_after([RouterList(R0, tuple(listed))])
    assert [m.why for r in rows[:4] for m in r.routing.missing] == ["listed as unhealthy", "listed as unhealthy"]
    assert why_not_routed(smg_entry("decode", 0, status="draining"), "decode") == "listed as draining"
    assert why_not_routed(smg_entry("decode", 0), "prefill") == "listed as decode"
    assert status_headline(rows).plain.endswith("not routed to: prefill[1], decode[0]")
    assert status_exit_code(rows) == ExitCode.CHECK_FAILED


def test_every_worker_routed_is_all_well():
    listed = [smg_entry(role, k) for role in ("prefill", "decode") for k in range(2)]
    rows = rows_after([RouterList(R0, tuple(listed))])
    assert status_exit_code(rows) == ExitCode.OK and routing_lines(rows) == []
    assert status_headline(rows).plain == "status: 5 of 5 running"


def test_a_router_whose_list_is_unread_makes_routing_unknown_and_is_said_but_leaves_the_exit_to_the_processes():
    """status is about processes: a router that does not answer its worker API (final-health's router layer fails
    it) or whose host was not asked leaves routing unknown, said in the headline and under the table; the exit
    code stays what the processes make it. Only a router that answered and does not route to a worker fails."""
    for unread in (
        RouterList(R0, error=f"{R0} runs but does not answer its worker API: ..."),
        RouterList(R0, error=f"unknown: {R0}: ...", unknown=True),
    ):
        rows = rows_after([unread])
        assert {r.routed for r in rows[:4]} == {None} and status_exit_code(rows) == ExitCode.OK
        assert routing_lines(rows) == [f"worker list not read: {unread.error}"]
        assert "routing unknown: prefill[0], prefill[1], decode[0], decode[1]" in status_headline(rows).plain
        assert status_headline(rows).style == "yellow"


def test_the_advice_is_the_rolling_restart_unless_its_own_refusal_applies():
    # both decodes out of the router: a rolling restart would leave it without a decode, so the pair co-restart
    listed = [smg_entry("prefill", 0), smg_entry("prefill", 1)]
    rows = rows_after([RouterList(R0, tuple(listed))])
    command, why = co_restart_advice(rows)
    assert command == PAIR_COMMAND and "no decode" in why
    assert routing_lines(rows)[-1].startswith(f"next: `{PAIR_COMMAND}` co-restarts everything")
    # a stopped run's usual leftovers (one prefill and one decode out): rolling, them first
    assert least_disruptive_co_restart(2, 2, {R0: [("prefill", 1), ("decode", 1)]}) == (ROLLING_COMMAND, None)
    assert least_disruptive_co_restart(1, 1, {R0: [("prefill", 0)]})[0] == PAIR_COMMAND  # 1P1D: never rolling
    assert least_disruptive_co_restart(1, 2, {})[0] == PAIR_COMMAND  # no router read: the shape alone decides
    assert least_disruptive_co_restart(2, 2, {}) == (ROLLING_COMMAND, None)


def test_status_advises_one_co_restart_for_every_hazard_it_names():
    """W7's variant: after a Ctrl-C the interrupt message said `restart --rolling` and status's restart-lineage
    warning `restart --pair` (a full outage). co_restart_command is the one status's hazards are to name: rolling
    on this 2x2 whether or not a worker is out, pair only when the rolling restart's refusal applies."""
    every = [smg_entry(role, k) for role in ("prefill", "decode") for k in range(2)]
    assert co_restart_command(rows_after([RouterList(R0, tuple(every))])) == ROLLING_COMMAND
    assert co_restart_command(rows_after([RouterList(R0, tuple(every[1:]))])) == ROLLING_COMMAND  # prefill[0] out
    assert co_restart_command(rows_after([RouterList(R0, tuple(every[:2]))])) == PAIR_COMMAND  # no decode routed
    not_read = [row(role, k) for role in ("prefill", "decode") for k in range(2)] + [row("router", 0)]
    assert co_restart_command(not_read) == ROLLING_COMMAND  # the shape decides
    assert co_restart_command(not_read[1:]) == PAIR_COMMAND  # one prefill


def test_only_a_running_worker_has_a_membership():
    with pytest.raises(ValueError, match="only a running prefill or decode"):
        row("decode", 0, judge_membership("decode", {R0: URL["decode"][0]}, []), active=False)
    stopped = dataclasses.replace(row("decode", 0), active=False, pid=None)
    assert stopped.routed is None and status_exit_code([stopped]) == ExitCode.CHECK_FAILED


@pytest.mark.parametrize(
    "running, status, words",
    [
        (False, Status.FAIL, "is not running (stale pidfile: pid 7 is gone): GET /workers: connection refused"),
        (True, Status.FAIL, "runs but does not answer its worker API: GET /workers: connection refused"),
        (None, Status.UNKNOWN, "unknown: router[0]@r:30001: GET /workers: connection refused; its host could"),
    ],
)
def test_a_router_that_does_not_answer_is_judged_by_what_its_host_says(running, status, words):
    got, message, hint = judge_unanswered_api(
        R0, "GET /workers", "connection refused", running, "stale pidfile: pid 7 is gone"
    )
    assert got is status and words in message
    assert (hint is None) == (running is None)


def test_the_worker_api_error_is_a_failure_when_the_host_answers_and_unreachable_when_not():
    """ops.router_workers.unanswered maps the judge to the exit code: 1 for a dead or hung router on a live host
    (it was 3, "unknown", for both), 3 only when its host cannot be asked (the real routers: test_rolling_restart)."""

    def dep(status):
        def read(role, r):
            if isinstance(status, Exception):
                raise status
            return status

        return SimpleNamespace(inv=SimpleNamespace(label=lambda role, r: R0), status=read)

    dead = unanswered(
        dep(ServiceStatus("r", False, None, None, "stale pidfile")), 0, "GET /workers", "connection refused"
    )
    assert isinstance(dead, StepFailed) and dead.exit_code == ExitCode.CHECK_FAILED and "pdctl deploy" in dead.hint
    hung = unanswered(dep(ServiceStatus("r", True, 7, 1.0, "running")), 0, "GET /workers", "no response within 5s")
    assert isinstance(hung, StepFailed) and "runs but does not answer" in hung.message
    gone = unanswered(dep(UnreachableError("ssh r: timed out", target="r", hint="check r")), 0, "GET /workers", "x")
    assert isinstance(gone, UnreachableError) and gone.exit_code == ExitCode.UNREACHABLE and gone.hint == "check r"
