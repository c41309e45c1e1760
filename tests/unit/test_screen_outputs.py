"""`pdctl verify outputs`'s screen at 60, 80 and 120 columns: the verdict and the next command first and last,
sessions that failed for one cause said once with their count, a corrupt session's parting shown, nothing wider
than the terminal, and 30 corrupt sessions within 24 rows at 80 columns."""

from __future__ import annotations

import pytest

from pdctl import render
from pdctl.checks.outputs import (
    OVERLAP_FIX,
    Answer,
    judge_outputs,
    judge_pair_output,
    judge_pd_use,
    judge_session,
)
from pdctl.ops.outputs import OutputsReport, OutputsSettings

REF = Answer(200, list(range(24)), "o=o]o]o]o=o=o=o=o.+'abcd")


def bad(k: int) -> Answer:
    """Session k's corrupt answer: garbage of its own from token 1."""
    return Answer(200, [0, 100 + k] + list(range(2, 24)), f"o$/{k:02d}hl]1lmZ-P=$/lvZ-P")


ROUTER = "router[0]@gpu-host-1.example.internal:30001"


@pytest.fixture(params=(60, 80, 120))
def width(request, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(request.param))
    return request.param


def _report(sessions) -> OutputsReport:
    pair = judge_pair_output("prefill[0] -> decode[0]", REF, REF, "", 8)
    pd = judge_pd_use(60, {"prefill[0]": 0.0}, {"prefill[0]": 60.0})
    verdict = judge_outputs(sessions, [pair], pd, concurrency=len(sessions), overlap_on=True)
    return OutputsReport("prod", OutputsSettings(sessions=len(sessions)), 2.5, sessions, [pair], pd, verdict)


def test_thirty_corrupt_sessions_fit_24_rows_verdict_and_fix_first_and_last(width, capsys):
    render.outputs_report(_report([judge_session(k, ROUTER, [REF], [bad(k)], 8, False) for k in range(30)]))
    lines = capsys.readouterr().out.splitlines()
    assert all(len(x) <= width for x in lines), lines
    assert len(lines) <= 24 or width < 80, lines  # 80x24 is the screen it must fit
    text = "\n".join(lines)
    assert lines[0].startswith("verify outputs: FAIL (30/30 sessions") and text.count("verify outputs: FAIL") == 2
    assert text.count("next: ") == 2 and text.rstrip().endswith("then pdctl deploy")
    if width >= 80:  # the verdict and the fix each on one line, first and last
        assert lines[-2] == lines[0] and lines[1] == lines[-1] == f"next: {OVERLAP_FIX}"
    assert "parts at token 1" in "".join(lines) and "... and 24 more" in "".join(lines)


def test_sessions_not_sent_for_one_cause_are_one_line(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    failed = judge_session(0, ROUTER, [Answer(error="connection refused")], [], 8, False)
    gave_up = Answer(error="not sent: session 0 failed at concurrency 1", sent=False)
    rest = [judge_session(k, ROUTER, [gave_up], [], 8, False) for k in range(1, 30)]
    render.outputs_report(_report([failed, *rest]))
    out = capsys.readouterr().out
    assert (
        "sessions not judged: 29\n  29 sessions (from session 1): not sent: session 0 failed at concurrency 1\n" in out
    )
    assert out.count("not sent") == 1
    assert "session 0 turn 0 via router[0]" in out and "connection refused" in out
