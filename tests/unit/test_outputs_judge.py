"""The outputs check's judges (pdctl.checks.outputs): where an answer parts from its reference, the early/late rule,
sessions, pairs, PD use and the whole verdict; and the drill that corrupts outputs parses as the engine reads it."""

from __future__ import annotations

import pytest

from engine import drills
from pdctl.checks.outputs import (
    CORRUPT,
    FAILED,
    LATE,
    OVERLAP_FIX,
    PASS,
    PD_FIX,
    UNKNOWN,
    Answer,
    first_parting,
    judge_answer,
    judge_outputs,
    judge_pair_output,
    judge_pd_use,
    judge_session,
    next_prompt,
    opener,
    parse_answer,
)
from pdctl.checks.result import NEXT_TRIAGE

REF = Answer(200, list(range(20)), "abcdefghijklmnopqrst")


def _ids(*changed: int) -> Answer:
    ids = list(range(20))
    for i in changed:
        ids[i] = 99
    return Answer(200, ids, "x" * 20)


def test_an_answer_parts_at_its_first_differing_token_and_text_is_used_only_without_ids():
    assert first_parting(REF, Answer(200, list(range(20)), "other text")) is None  # ids decide when both have them
    p = first_parting(REF, _ids(5, 9))
    assert p is not None and (p.at, p.unit) == (5, "token")
    p = first_parting(Answer(200, None, "hello world"), Answer(200, None, "hello there"))
    assert p is not None and (p.at, p.unit, p.found) == (6, "char", "there")
    stopped = first_parting(REF, Answer(200, list(range(12)), "abc"))  # an answer that stops early parts there
    assert stopped is not None and stopped.at == 12


def test_early_parting_is_corruption_late_parting_is_a_late_divergence_unless_strict():
    assert judge_answer(REF, REF, 8, strict=False) == (PASS, None)
    assert judge_answer(REF, _ids(1), 8, strict=False)[0] == CORRUPT
    assert judge_answer(REF, _ids(7), 8, strict=False)[0] == CORRUPT
    assert judge_answer(REF, _ids(8), 8, strict=False)[0] == LATE
    assert judge_answer(REF, _ids(15), 8, strict=True)[0] == CORRUPT
    assert judge_answer(REF, Answer(error="HTTP 500: KV transfer failed"), 8, strict=False) == (FAILED, None)
    # text only: the early window is in characters (4 a token)
    text = Answer(200, None, "a" * 40)
    assert judge_answer(text, Answer(200, None, "a" * 31 + "b" * 9), 8, strict=False)[0] == CORRUPT
    assert judge_answer(text, Answer(200, None, "a" * 32 + "b" * 8), 8, strict=False)[0] == LATE


def test_parse_answer_takes_output_ids_and_names_a_failure():
    a = parse_answer(200, {"text": "hi", "output_ids": [1, 2], "meta_info": {}})
    assert a.ok and a.ids == [1, 2] and a.text == "hi"
    assert parse_answer(200, {"text": "hi"}).ids is None
    assert parse_answer(500, {"error": "KV transfer failed"}).error == "HTTP 500: KV transfer failed"
    assert parse_answer(200, "not json").error == "HTTP 200 without a text"
    assert parse_answer(None, None, "connection refused").error == "connection refused"


def test_a_session_is_its_worst_turn_and_a_failed_reference_fails_it():
    s = judge_session(3, "router[0]", [REF, REF], [REF, _ids(2)], 8, False)
    assert (s.status, s.turn) == (CORRUPT, 1) and "parts at token 2" in s.found
    s = judge_session(3, "router[0]", [REF, REF], [_ids(10), Answer(error="HTTP 503: x")], 8, False)
    assert (s.status, s.turn, s.found) == (FAILED, 1, "HTTP 503: x")
    s = judge_session(0, "router[0]", [Answer(error="no response within 30s")], [], 8, False)
    assert s.status == FAILED and s.found == "at concurrency 1: no response within 30s"
    not_sent = Answer(error="not sent: session 0 failed at concurrency 1", sent=False)
    s = judge_session(1, "router[0]", [not_sent], [], 8, False)
    assert s.status == UNKNOWN and s.found == not_sent.error
    s = judge_session(2, "router[0]", [REF, REF], [REF], 8, False)  # a turn with no answer at N never passes
    assert (s.status, s.turn) == (UNKNOWN, 1)


def test_pairs_must_give_the_reference_tokens():
    assert judge_pair_output("p0 -> d0", REF, REF, "", 8).status == PASS
    bad = judge_pair_output("p0 -> d1", REF, _ids(0), "", 8)
    assert bad.status == CORRUPT and "token 0" in bad.found
    assert judge_pair_output("p1 -> d0", REF, None, "pair canary failed: HTTP 500", 8).status == FAILED
    assert judge_pair_output("p1 -> d1", REF, None, "unknown: gpu3 silent", 8, unknown=True).status == UNKNOWN


def test_pd_is_used_only_when_the_prefills_transfers_rose_with_the_answered_requests():
    assert judge_pd_use(4, {"p0": 10.0, "p1": 0.0}, {"p0": 12.0, "p1": 2.0}).status == PASS
    no = judge_pd_use(4, {"p0": 10.0}, {"p0": 10.0})
    assert no.status == FAILED and "quietly is not PD" in no.found
    assert judge_pd_use(4, {"p0": None}, {"p0": 3.0}).status == UNKNOWN
    assert judge_pd_use(0, {"p0": 1.0}, {"p0": 1.0}).status == UNKNOWN


def test_the_verdict_names_the_corruption_rate_and_the_seed_fix_first():
    sessions = [judge_session(k, "r", [REF], [_ids(1) if k < 3 else REF], 8, False) for k in range(10)]
    pd = judge_pd_use(10, {"p0": 0.0}, {"p0": 10.0})
    v = judge_outputs(sessions, [], pd, concurrency=10, overlap_on=True)
    assert not v.ok and not v.unknown and v.corruption_rate == pytest.approx(0.3)
    assert "3/10 sessions corrupt at concurrency 10 (30%)" in v.summary
    assert v.next_steps[0] == OVERLAP_FIX
    assert OVERLAP_FIX not in judge_outputs(sessions, [], pd, concurrency=10, overlap_on=False).next_steps
    clean = [judge_session(k, "r", [REF], [REF], 8, False) for k in range(10)]
    assert judge_outputs(clean, [], pd, concurrency=10, overlap_on=True).ok
    late = [judge_session(0, "r", [REF], [_ids(12)], 8, False)]
    v = judge_outputs(late, [], pd, concurrency=1, overlap_on=True)
    assert v.ok and "1 late divergence(s), not counted" in v.summary
    not_pd = judge_outputs(clean, [], judge_pd_use(10, {"p0": 0.0}, {"p0": 0.0}), concurrency=10, overlap_on=True)
    assert not not_pd.ok and not_pd.next_steps == [PD_FIX] and "PD not used" in not_pd.summary
    unknown = [judge_session(1, "r", [Answer(error="not sent: session 0 failed", sent=False)], [], 8, False)]
    v = judge_outputs(clean + unknown, [], pd, concurrency=10, overlap_on=True)
    assert v.unknown and not v.ok
    failed = [judge_session(0, "r", [Answer(error="no response within 30s")], [], 8, False)]
    v = judge_outputs(failed + unknown, [], pd, concurrency=2, overlap_on=True)
    assert not v.ok and not v.unknown and v.next_steps == [NEXT_TRIAGE]


def test_sessions_are_fixed_and_grow_turn_by_turn():
    assert len({opener(k) for k in range(30)}) == 30
    assert next_prompt("P", " answer", 0).startswith("P answer\nUser: ") and next_prompt("P", "a", 0).endswith(
        "Assistant:"
    )


def test_the_overlap_corruption_drill_parses_with_its_batch_threshold():
    assert drills.parse(env="overlap-corruption").overlap_corruption_batch == drills.OVERLAP_BATCH
    d = drills.parse(["overlap-corruption=3"], env="")
    assert d.overlap_corruption_batch == 3 and d.names() == ["overlap-corruption=3"]
    for bad in ("overlap-corruption=0", "overlap-corruption=x"):
        with pytest.raises(ValueError, match="overlap-corruption"):
            drills.parse(env=bad)
    assert drills.parse(env="").overlap_corruption_batch == 0


def test_triage_names_the_seed_corruption_only_with_the_switch_on_and_a_pd_that_is_not_pd():
    from pdctl.checks.triage_outputs import OutputsSummary, outputs_findings

    assert outputs_findings(OutputsSummary(30, 30, 0)) == []
    (f,) = outputs_findings(OutputsSummary(30, 30, 9, example="session 1 turn 0: parts", overlap_on=["decode[0]"]))
    assert f.kind == "outputs-corruption" and f.severity == "action" and f.next_step == OVERLAP_FIX
    assert "the seed's high-concurrency output corruption" in f.inferred[0]
    (g,) = outputs_findings(OutputsSummary(30, 30, 9))
    assert g.kind == "outputs-corruption" and g.next_step == "pdctl logs decode" and "already off" in g.inferred[0]
    (h,) = outputs_findings(OutputsSummary(4, 4, 0, pd_status="failed", pd_found="8 answered, 0 transfers"))
    assert h.kind == "outputs-not-pd" and h.observed == ["8 answered, 0 transfers"]
