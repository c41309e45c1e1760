""" "unknown" is reserved for what did not answer (issue 28, W5 and W6), the pure judges: a worker whose /metrics
could not be read on a host that answered fails its transfer check (the same judge in final-health and the watch);
a pair is unknown only when a host of its two workers did not answer, and a failed pair outranks an unknown one in
the matrix's verdict and exit code."""

from __future__ import annotations

import socket
from contextlib import contextmanager

from pdctl.checks.pairs import FAIL, PASS, UNKNOWN, judge_matrix, judge_pair, judge_unasked, pair_check
from pdctl.checks.result import Status
from pdctl.checks.transfer import UNREAD_CHECK, judge_unread
from pdctl.ops.pairs import PairsReport
from tests.e2e.helpers import local_inventory
from tests.fixtures.http_servers import Handler, close_http_client, serving
from tests.fixtures.net import closed_port, free_port
from tests.unit.test_checks_pairs import PREFILL_OK, decode_said


def _res(i, j, status):
    r = judge_pair(i, j, 1, PREFILL_OK, decode_said("the quick brown fox"))
    r.status = status
    return r


def _report(results, n_p, n_d) -> PairsReport:
    return PairsReport(
        "d",
        4.0,
        1.0,
        [f"prefill[{i}]@a:1" for i in range(n_p)],
        [f"decode[{j}]@b:2" for j in range(n_d)],
        results,
        judge_matrix(results, n_p, n_d),
    )


def test_a_worker_whose_metrics_cannot_be_read_on_a_live_host_fails():
    """W5: a dead decode on a host that answers: its transfer check fails (final-health said 1, the watch 3)."""
    c = judge_unread("decode[0]@a:30002", "cannot read /metrics of decode[0]@a:30002: connection refused", "a hint")
    assert c.status is Status.FAIL and c.layer == "transfer" and c.name == UNREAD_CHECK
    assert c.observed.endswith("connection refused") and c.detail == "could not read metrics; a hint"
    assert c.next_step  # what to run: is the role running?
    # variant: a hung server (no answer within the timeout) on a live host is no different
    hung = judge_unread("prefill[0]@a:30000", "cannot read /metrics of prefill[0]@a:30000: no response within 5s")
    assert hung.status is Status.FAIL and hung.detail == "could not read metrics"


def test_a_failed_pair_outranks_an_unknown_one_and_both_are_said():
    """W6: one pair on a host that did not answer, one broken on hosts that answer: exit 1 (the failure), not 3."""
    results = [_res(0, 0, FAIL), judge_unasked(0, 1, "decode: host gone did not answer: connection refused")]
    rep = _report(results, 1, 2)
    v = rep.verdict
    assert not v.ok and v.unknown and v.failed == ["prefill[0] -> decode[0]"]
    assert v.summary == "1 of 2 pair(s) failed: prefill[0] -> decode[0]; 1 unknown"
    assert rep.exit_code == 1 and rep.next_steps[0].startswith("pdctl triage")
    assert all("restart" not in s for s in rep.next_steps)  # nothing is healed while a pair could not be seen
    # variant: only unknown pairs (the others pass): exit 3, the unknown pair named
    only = _report([_res(0, 0, PASS), judge_unasked(0, 1, "decode: host gone did not answer")], 1, 2)
    assert only.exit_code == 3 and only.verdict.summary == "1 of 2 pair(s) unknown: prefill[0] -> decode[1]"


def test_a_pair_no_canary_was_sent_through_is_unknown_with_no_room():
    r = judge_unasked(1, 0, "prefill: host gone did not answer: timed out")
    assert r.status == UNKNOWN and r.name == "prefill[1] -> decode[0]" and r.room is None
    assert r.found == "prefill: host gone did not answer: timed out" and not r.ok
    # a judged pair keeps its room in its final-health row
    assert pair_check(_res(0, 0, FAIL), "p", "d").data["room"] == 1


# -- real HTTP servers on 127.0.0.1 and a real SSH connect to a port nothing listens on -------------------------


@contextmanager
def _deployment(xdg_state, ports: dict[str, int], *, gone: str | None = None, extra_prefill: bool = False):
    """A local 1P1D (or 2P1D) on `ports`; with `gone` ("decode" or "prefill"), one more worker of that role on an
    SSH host whose port nothing listens on (its connect is refused: the host does not answer)."""
    from pdctl.inventory import parse_inventory
    from pdctl.ops.context import Deployment

    data = local_inventory("unanswered", {**ports, "router": free_port(), "prometheus": free_port()})
    data["hosts"]["local"]["internal_address"] = "127.0.0.1"
    data["final_health"] = {"metrics_timeout": 1, "probe": {"timeout": 4}}
    if gone is not None:
        data["hosts"]["gone"] = {
            "transport": "ssh",
            "address": "127.0.0.1",
            "port": closed_port(),
            "connect_timeout": 2,
            "accept_new_host_key": True,
        }
        for role in ("prefill", "decode"):  # reachable from the other host (probed on loopback of its own)
            data["roles"][role][0]["listen_host"] = "0.0.0.0"
        data["roles"][gone].append(dict(data["roles"][gone][0], host="gone", port=free_port()))
    with Deployment(parse_inventory(data, "inv.yaml")) as dep:
        yield dep


class _NoText(Handler):
    """A worker that answers /health 200 and /generate 200 with no text: the pair's KV path is broken."""


@contextmanager
def _hung():
    """A port that accepts connections (the kernel's backlog) and never answers: a hung server on a live host."""
    s = socket.socket()
    s.bind(("127.0.0.1", free_port()))
    s.listen(8)
    try:
        yield s.getsockname()[1]
    finally:
        s.close()


def test_the_watch_round_and_final_health_fail_a_dead_worker_on_a_live_host_alike(xdg_state):
    """W5 from its reproduction: the decode's server is dead (its port refuses), its host (local) answers. The
    watch's inflight round and final-health's transfer layer both fail its transfer check; nothing is unknown."""
    from pdctl.ops.layers.inflight import inflight_round
    from pdctl.ops.layers.transfer import transfer_layer

    close_http_client()
    with (
        serving() as (_srv, url),
        _deployment(
            xdg_state, {"prefill": int(url.rsplit(":", 1)[1]), "decode": closed_port(), "bootstrap": free_port()}
        ) as dep,
    ):
        decode = dep.inv.label("decode", 0)
        seen = inflight_round(dep)
        final = transfer_layer(dep, None)
    assert seen.point is not None and set(seen.point.errors) == {decode}
    assert seen.unknown == {}
    assert [(c.target, c.name, c.status) for c in seen.checks] == [(decode, "/metrics", Status.FAIL)]
    assert "connection refused" in seen.checks[0].observed
    mine = [(c.target, c.name, c.status) for c in final if c.target == decode]
    assert mine == [(decode, "/metrics", Status.FAIL)]  # the same judge, the same verdict


def test_a_hung_worker_fails_and_only_a_worker_whose_host_does_not_answer_is_unknown(xdg_state):
    """W5's variant: the decode accepts connections and never answers (hung): a failure too. A worker on the SSH
    host that does not answer is unknown, and only it (the round's judge of the workers a sample could not read)."""
    from pdctl.ops.layers.inflight import unread_workers

    close_http_client()
    with (
        _hung() as port,
        serving() as (_srv, url),
        _deployment(
            xdg_state, {"prefill": int(url.rsplit(":", 1)[1]), "decode": port, "bootstrap": free_port()}, gone="decode"
        ) as dep,
    ):
        local, far = dep.inv.label("decode", 0), dep.inv.label("decode", 1)
        from pdctl.ops.inflight import read_point

        errors = read_point(dep).errors
        checks, unknown = unread_workers(dep, errors)
    assert set(errors) == {local, far}
    assert "no response" in errors[local] or "timed out" in errors[local], errors[local]
    assert [(c.target, c.status) for c in checks] == [(local, Status.FAIL)]
    assert set(unknown) == {far} and "host gone did not answer" in unknown[far]


def test_a_broken_pair_on_hosts_that_answer_fails_while_the_pair_on_a_silent_host_is_unknown(xdg_state):
    """W6 from its reproduction: decode[1] on a host that does not answer; prefill[0] -> decode[0], on hosts that
    answer, is broken (both workers healthy, the decode answers no text). `verify pairs` tests it and fails it
    (exit 1) and says the other pair unknown; the watch's pairs round does the same, never hiding the local one."""
    from pdctl.ops.layers.pairs import pairs_round
    from pdctl.ops.pairs import verify_pairs

    close_http_client()
    with (
        serving(_NoText) as (_p, p_url),
        serving(_NoText) as (_d, d_url),
        _deployment(
            xdg_state,
            {"prefill": int(p_url.rsplit(":", 1)[1]), "decode": int(d_url.rsplit(":", 1)[1]), "bootstrap": free_port()},
            gone="decode",
        ) as dep,
    ):
        rep = verify_pairs(dep)
        seen = pairs_round(dep)
    by = {r.name: r for r in rep.pairs}
    assert by["prefill[0] -> decode[0]"].status == FAIL and "tokens" in by["prefill[0] -> decode[0]"].found
    assert by["prefill[0] -> decode[1]"].status == UNKNOWN and "host gone did not answer" in rep.pairs[1].found
    assert rep.exit_code == 1 and rep.verdict.failed == ["prefill[0] -> decode[0]"]
    assert [(c.target, c.status) for c in seen.checks] == [("prefill[0] -> decode[0]", Status.FAIL)]
    assert set(seen.unknown) == {"prefill[0] -> decode[1]"}
    assert {(p, d, s) for p, d, s, _ in seen.pairs} == {
        (rep.prefills[0], rep.decodes[0], FAIL),
        (rep.prefills[0], rep.decodes[1], UNKNOWN),
    }
