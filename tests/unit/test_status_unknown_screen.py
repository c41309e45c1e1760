"""A check whose target could not be asked is UNKNOWN (never stopped, never failed): every screen that sums up or
orders checks shows it, in its own colour, between a failure and a warning."""

from __future__ import annotations

from pdctl import render
from pdctl.checks.result import WORST_FIRST, CheckResult, Status
from pdctl.ops.verify import HealthReport
from pdctl.render.health import layer_counts
from pdctl.render.screen import STATUS_STYLE

DECODE = "decode[0]@gpu2:30002"


def test_every_status_has_a_style_and_a_rank():
    assert set(STATUS_STYLE) == set(Status) == set(WORST_FIRST)
    assert WORST_FIRST.index(Status.FAIL) < WORST_FIRST.index(Status.UNKNOWN) < WORST_FIRST.index(Status.WARN)


def test_layer_counts_say_how_many_are_unknown():
    results = [
        CheckResult("health", "prefill[0]@gpu1:30000", "/health", Status.PASS),
        CheckResult("health", DECODE, "/health", Status.UNKNOWN, observed="no answer from gpu2 within 5s"),
    ]
    assert layer_counts(results) == "  1/2 pass, 1 unknown"


def test_verbose_final_health_lists_an_unknown_check(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    unknown = CheckResult("health", DECODE, "/health", Status.UNKNOWN, observed="no answer from gpu2 within 5s")
    report = HealthReport("prod.yaml", {"health": [unknown]})
    render.health_report(report, verbose=True)
    out = capsys.readouterr().out
    assert not report.ok
    assert out.splitlines()[0] == "final-health: UNKNOWN (1 check(s) could not be asked in: health)"
    assert "could not be asked" in out.splitlines()[1] and DECODE in out and "no answer from gpu2" in out


def test_a_playbook_step_reads_unknown_as_no_pass_with_exit_3():
    from pdctl.playbook.steps import health_exit_code, health_outcome

    unknown = CheckResult("health", DECODE, "/health", Status.UNKNOWN, observed="no answer from gpu2 within 5s")
    passed = CheckResult("e2e", "router[0]@gpu1:30001", "chat completion", Status.PASS)
    report = HealthReport("prod.yaml", {"health": [unknown], "e2e": [passed]})
    ok, layers, summary = health_outcome(report)
    assert not ok and layers == {"health": False, "e2e": True}
    assert summary == f"final-health: UNKNOWN in health ({DECODE} /health: no answer from gpu2 within 5s)"
    assert health_exit_code(report) == 3
    failed = CheckResult("e2e", "router[0]@gpu1:30001", "chat completion", Status.FAIL, observed="HTTP 503")
    assert health_exit_code(HealthReport("prod.yaml", {"health": [unknown], "e2e": [failed]})) == 1
