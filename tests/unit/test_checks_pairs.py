"""The pair canary's judges (pdctl.checks.pairs): the body sent, one pair's verdict, the matrix verdict."""

from __future__ import annotations

import random

import pytest

from pdctl.checks.pairs import (
    FAIL,
    PASS,
    UNKNOWN,
    LegAnswer,
    canary_body,
    fresh_room,
    judge_matrix,
    judge_pair,
    leg_timed_out,
    pair_check,
    pair_name,
)
from pdctl.checks.result import Status

PREFILL_OK = LegAnswer(
    200, {"text": "", "meta_info": {"finish_reason": {"type": "length", "length": 0}, "completion_tokens": 0}}, ms=20.0
)


def decode_said(text: str, tokens: int = 8, **meta) -> LegAnswer:
    return LegAnswer(200, {"text": text, "meta_info": {"completion_tokens": tokens, **meta}}, ms=25.0)


def test_body_is_the_routers_with_a_fresh_room():
    body = canary_body(prompt="hi", max_tokens=8, bootstrap_host="10.0.0.5", bootstrap_port=8998, room=42, model="tiny")
    assert body["bootstrap_host"] == "10.0.0.5" and body["bootstrap_port"] == 8998 and body["bootstrap_room"] == 42
    assert body["text"] == "hi" and body["sampling_params"]["max_new_tokens"] == 8 and body["rid"] == "pdctl-pair-42"
    rooms = {fresh_room(random.Random(s)) for s in range(50)}
    assert len(rooms) == 50 and all(0 <= r < 2**63 for r in rooms)


def test_a_pair_with_varied_content_passes():
    r = judge_pair(0, 1, 7, PREFILL_OK, decode_said("the quick brown fox"))
    assert r.status == PASS and r.ok and r.name == "prefill[0] -> decode[1]"
    assert r.kv_transfer_ms is None and r.decode_ms == 25.0 and r.content == "the quick brown fox"


def test_transfer_time_is_taken_when_the_engine_reports_it():
    assert (
        judge_pair(0, 0, 1, PREFILL_OK, decode_said("abc def ghi", kv_transfer_latency_ms=3.25)).kv_transfer_ms == 3.2
    )
    assert judge_pair(0, 0, 1, PREFILL_OK, decode_said("abc def ghi", kv_transfer_latency=0.5)).kv_transfer_ms == 500.0


@pytest.mark.parametrize(
    "prefill,decode,found",
    [
        (PREFILL_OK, decode_said("aaaa aaaa aaaa aaaa"), "one token repeated"),
        (PREFILL_OK, decode_said(""), "empty completion"),
        (PREFILL_OK, LegAnswer(500, {"error": "request aborted"}), "decode: HTTP 500 request aborted"),
        (
            LegAnswer(500, {"object": "error", "message": "KV transfer failed"}),
            decode_said("fine words here"),
            "prefill: HTTP 500 KV transfer failed",
        ),
        (
            LegAnswer(400, "bootstrap_host and bootstrap_room are required"),
            decode_said("fine words here"),
            "prefill: HTTP 400 bootstrap_host",
        ),
        (PREFILL_OK, LegAnswer(error="no response within 4s (read timeout)"), "decode: no response within 4s"),
        (PREFILL_OK, LegAnswer(error="connection refused"), "decode: connection refused"),
    ],
)
def test_a_broken_pair_fails_saying_what_was_found(prefill, decode, found):
    r = judge_pair(1, 1, 9, prefill, decode, ["closed both connections"])
    assert r.status == FAIL and found in r.found, r.found
    assert r.aborted == ["closed both connections"]
    row = pair_check(r, "prefill[1]@gpu1:30000", "decode[1]@gpu2:30002")
    assert row.status is Status.FAIL and row.target == "prefill[1] -> decode[1]" and row.next_step


def test_a_host_that_does_not_answer_is_unknown_not_failed():
    r = judge_pair(0, 1, 3, LegAnswer(error="connect timed out after 4s", unreachable=True), decode_said("x y z"))
    assert r.status == UNKNOWN and "prefill: connect timed out" in r.found


def _res(i, j, status):
    r = judge_pair(i, j, 1, PREFILL_OK, decode_said("the quick brown fox"))
    r.status = status
    return r


def test_matrix_names_exactly_the_broken_pair():
    results = [_res(0, 0, PASS), _res(0, 1, PASS), _res(1, 0, PASS), _res(1, 1, FAIL)]
    v = judge_matrix(results, 2, 2)
    assert not v.ok and v.failed == ["prefill[1] -> decode[1]"] and v.passed == 3 and v.total == 4
    assert v.summary == "1 of 4 pair(s) failed: prefill[1] -> decode[1]"


def test_matrix_all_pass_and_unknown_and_missing():
    assert judge_matrix([_res(i, j, PASS) for i in range(2) for j in range(3)], 2, 3).summary == "6 of 6 pairs pass"
    v = judge_matrix([_res(0, 0, PASS), _res(0, 1, UNKNOWN)], 1, 2)
    assert not v.ok and v.unknown and v.failed == []
    missing = judge_matrix([_res(0, 0, PASS)], 1, 2)
    assert not missing.ok and missing.missing == [pair_name(0, 1)] and missing.failed == [pair_name(0, 1)]


def test_only_an_unanswered_canary_is_to_be_aborted():
    assert leg_timed_out(LegAnswer(error="no response within 2s (read timeout)"))
    assert not leg_timed_out(LegAnswer(error="connection refused"))
    assert not leg_timed_out(LegAnswer(error="connect timed out after 2s", unreachable=True))
    assert not leg_timed_out(decode_said("fine words here"))


def test_the_heal_of_failed_pairs():
    from pdctl.checks.pairs import heal_step

    assert heal_step([], 2, 2) == ""
    # xPyD: the rolling co-restart, the failed pairs' workers first, in matrix order
    assert heal_step([(1, 0), (0, 1)], 2, 2) == "pdctl restart --rolling --first-pair 0:1 --first-pair 1:0"
    # every pair broken: none to put first
    assert heal_step([(0, 0), (0, 1), (1, 0), (1, 1)], 2, 2) == "pdctl restart --rolling"
    # one prefill (or one decode): no rolling restart keeps the service up; the pair co-restart
    assert heal_step([(0, 1)], 1, 2) == "pdctl restart --pair"
    assert heal_step([(0, 0)], 1, 1) == "pdctl restart --pair"


def test_pairs_whose_two_workers_both_refused_say_status_first_not_a_restart():
    """Nothing listens on either worker of every failed pair (a stopped deployment): the workers are down, not the
    pairs broken, so the next command is status, never a pair restart; one side refusing (a killed decode beside
    a live prefill) keeps the heal."""
    from pdctl.checks.pairs import NEXT_STATUS, both_refused
    from pdctl.checks.result import NEXT_TRIAGE
    from pdctl.ops.pairs import PairsReport

    refused = LegAnswer(error="connection refused")
    down = [judge_pair(i, j, 1, refused, refused) for i in range(2) for j in range(2)]
    assert both_refused(down)
    rep = PairsReport("inv.yaml", 4.0, 12.0, ["p0", "p1"], ["d0", "d1"], down, judge_matrix(down, 2, 2))
    assert rep.next_steps == [NEXT_STATUS, NEXT_TRIAGE]
    killed = [judge_pair(0, 0, 1, LegAnswer(error="no response within 4s (read timeout)"), refused)]
    assert not both_refused(killed)
    one = PairsReport("inv.yaml", 4.0, 12.0, ["p0"], ["d0"], killed, judge_matrix(killed, 1, 1))
    assert one.next_steps[0] == NEXT_TRIAGE and one.next_steps[1].startswith("pdctl restart")
    assert not both_refused([judge_pair(0, 0, 1, PREFILL_OK, decode_said("the quick brown fox"))])  # none failed
