"""What the storm, `verify inflight` and triage print: a weak pass says so, numbers are formatted for humans (seconds
with one decimal, counters as integers), every sparkline is labelled, the watch is not repeated under the table, and
an inflight total above --requests is explained. Rendering is captured from pdctl.render's console."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from pdctl import render
from pdctl.checks.inflight import fmt_count, fmt_s, judge_inflight
from pdctl.ops.inflight import InflightReport, Point
from pdctl.ops.storm import StormReport
from pdctl.checks.storm import HitReport, judge_watch
from pdctl.serialize import to_data

INF = "sglang:num_prefill_inflight_queue_reqs"
XFER = "sglang:num_decode_transfer_queue_reqs"


@pytest.fixture
def out(monkeypatch):
    buf = io.StringIO()
    monkeypatch.setattr(
        render,
        "console",
        lambda stderr=False: Console(file=buf, width=400, highlight=False, soft_wrap=False, color_system=None),
    )
    return buf


def pt(t, inflight=0.0, transfer=0.0, failed=0.0, gen=10.0):
    g = {INF: inflight, XFER: transfer}
    return Point(
        t=t,
        gauges=g,
        generation_tokens=gen,
        per_worker={"prefill[0]": {INF: inflight}},
        counters={"prefill[0]": {"transfer_failed": failed, "bootstrap_failed": 0.0}},
        gen_throughput={},
    )


def hits(n_hits, aborted, window=(1.8, 2.7)):
    return HitReport(
        {"hit": n_hits, "early": aborted - n_hits},
        aborted,
        n_hits,
        (n_hits / aborted) if aborted and window else None,
        0.0,
        window,
    )


def storm_rep(n_hits=0, aborted=8, target="random", window=(1.8, 2.7), points=None, requests=8):
    pts = points or [pt(-6.39), pt(0.0, 5, 3), pt(1.01, 4, 2, 2), pt(2.73), pt(3.01), pt(6.73)]
    rep = StormReport(
        config={"requests": requests, "prompt_tokens": 3000, "target": target},
        router="http://r",
        points=pts,
        load_started_at=0.0,
        load_stopped_at=2.73,
        window=window,
    )
    rep.verdict = judge_watch([(p.t - 2.73, p.inflight, p.generation_tokens) for p in pts if p.t >= 2.73], 4.0)
    rep.hits = hits(n_hits, aborted, window)
    return rep


def test_fmt_helpers():
    assert fmt_s(2.665e-05) == "0.0s" and fmt_s(6.00493) == "6.0s" and fmt_s(12.0036) == "12.0s"
    assert fmt_s(-0.01) == "0.0s" and fmt_s(0.28) == "0.3s"
    assert fmt_count(0.0) == "0" and fmt_count(9.0) == "9" and fmt_count(1.5) == "1.5" and fmt_count(None) == "n/a"


def test_watch_reason_has_one_decimal_seconds():
    v = judge_watch([(2.665e-05, 0, 1), (12.0036, 0, 1)], 12)
    assert v.reason == "inflight drained to 0 by t+0.0s and stayed 0 to t+12.0s"
    v = judge_watch([(t, 8.0, 10) for t in (0, 6.00493)], 6)
    assert "stuck at 8 for the whole 6.0s watch" in v.reason


def test_inflight_summary_seconds():
    v = judge_inflight([(0.0, {INF: 0}, 1.0), (6.00493, {INF: 0}, 1.0)], 6.0)
    assert v.summary == "all PD queues 0 for 6.0s"


def test_pass_with_no_hit_is_weak_but_exits_zero(out):
    rep = storm_rep(n_hits=0, aborted=8)
    assert rep.ok and rep.exit_code() == 0
    assert rep.weak_reason.startswith("0 of 8 aborts landed in the transfer window; the race was not exercised")
    assert "try --target transfer-window" in rep.weak_reason
    assert to_data(rep)["weak_pass"] == rep.weak_reason
    from pdctl.render import storm_report

    storm_report(rep)
    last = out.getvalue().strip().splitlines()[-1]
    assert last.startswith(
        "storm: PASS (weak: 0 of 8 aborts landed in the transfer window; the race was not "
        "exercised; try --target transfer-window): inflight drained to 0 by t+0.0s"
    )


def test_weak_pass_of_an_aimed_storm_suggests_a_wider_window():
    rep = storm_rep(n_hits=0, aborted=6, target="transfer-window")
    assert "--target" not in rep.weak_reason and "--prompt-tokens" in rep.weak_reason


def test_a_pass_whose_aborts_the_servers_confirmed_is_not_weak_whatever_the_timing_says():
    """0 hits by the client's timing (an estimate), but transfer_failed rose: the race was exercised."""
    import dataclasses

    rep = storm_rep(n_hits=0, aborted=4)
    assert rep.weak_reason is not None
    rep.hits = dataclasses.replace(rep.hits, confirmed_in_window=2.0)
    assert rep.weak_reason is None
    rep = storm_rep(window=None)
    rep.hits = dataclasses.replace(rep.hits, confirmed_in_window=1.0)
    assert rep.weak_reason is None


def test_uncalibrated_pass_is_weak_too():
    rep = storm_rep(window=None)
    assert rep.weak_reason and "--calibrate 0" in rep.weak_reason


def test_pass_with_hits_is_plain_and_fail_is_never_weak(out):
    from pdctl.render import storm_report

    rep = storm_rep(n_hits=3, aborted=8)
    assert rep.weak_reason is None
    storm_report(rep)
    assert out.getvalue().strip().splitlines()[-1].startswith("storm: PASS: inflight drained")
    stuck = storm_rep(points=[pt(0.0, 1), pt(2.73, 1), pt(6.73, 1)])
    assert not stuck.ok and stuck.weak_reason is None


def test_storm_rendering_formats_labels_and_does_not_repeat_the_watch(out):
    from pdctl.render import storm_report

    storm_report(storm_rep(n_hits=3))
    text = out.getvalue()
    assert "after load stopped" not in text
    assert "inflight per sample:" in text and "transfer_failed per sample:" in text
    assert "-6.4" in text and "-6.39" not in text and "watch +0.3s" in text and "watch +0.28s" not in text
    assert "e-05" not in text


def test_overcount_is_explained_in_a_footnote(out):
    from pdctl.render import storm_report

    rep = storm_rep(n_hits=3, points=[pt(-1), pt(0.0, 5, 4), pt(1.0, 2, 1), pt(2.73), pt(6.73)])
    note = rep.overcount_note()
    assert note and "peaked at 9 with --requests 8" in note and "counted on both sides" in note
    storm_report(rep)
    assert "* inflight peaked at 9 with --requests 8" in out.getvalue()
    assert storm_rep(n_hits=3).overcount_note() is None


def test_verify_inflight_sparkline_is_labelled(out):
    from pdctl.render import inflight_report

    pts = [pt(0.0), pt(1.0), pt(3.00486)]
    v = judge_inflight([(p.t, p.gauges, p.generation_tokens) for p in pts], 3.0)
    inflight_report(InflightReport(3.0, 1.0, pts, v))
    text = out.getvalue()
    assert "inflight per sample: max 0; 3 samples" in text and "0 └───" in text  # a labelled chart, flat at 0
    assert "all PD queues 0 for 3.0s" in text and "3.00486" not in text


def test_a_calibration_under_background_traffic_says_so(out):
    from pdctl.ops.storm_plan import Calibration
    from pdctl.render import storm_report

    rep = storm_rep(n_hits=1, aborted=1, target="transfer-window", requests=1)
    rep.calibration = Calibration([3.1, 4.0], 1.2, None, background_per_s=0.667)
    storm_report(rep)
    assert (
        "calibration: first token 3.55s, KV transfer 1.20s, under background traffic of 0.667 req/s (taken "
        "out)" in out.getvalue()
    )
    rep.calibration = Calibration([1.5], 0.5, None)
    out.truncate(0)
    storm_report(rep)
    assert "calibration: first token 1.50s, KV transfer 0.50s\n" in out.getvalue()


def test_a_playbook_storm_step_says_a_weak_pass(monkeypatch):
    """abort-storm-ab's verdict read PASS with no word of the weak evidence (it was only in the step's data)."""
    from pdctl.ops import storm as storm_op
    from pdctl.playbook.kinds.storm import StormArgs, run
    from pdctl.playbook.outcome import RunContext

    monkeypatch.setattr(storm_op, "storm", lambda dep, cfg, router=None: storm_rep(n_hits=0, aborted=4))
    out = run(RunContext(dep=None), StormArgs(requests=4, prompt_tokens=500))
    assert out.ok and "WEAK pass: 0 of 4 aborts landed in the transfer window" in out.summary, out.summary
