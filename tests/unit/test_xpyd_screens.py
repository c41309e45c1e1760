"""The xPyD screens at 80 columns (and 120): status, final-health, triage and storm of a 4 prefill x 4 decode + 2 router
deployment over four hosts, with a failure in the middle (decode[2]). One row per instance, the verdict first, the
failed check's expected and found on the screen, no instance label cut, and a bounded number of lines."""

from __future__ import annotations

import re

import pytest

from pdctl import render
from pdctl.checks.metrics import parse_metrics
from pdctl.checks.result import Status
from pdctl.checks.role_status import RoleStatus
from pdctl.checks.storm import HitReport, judge_watch
from pdctl.checks.transfer import judge_transfer
from pdctl.ops.inflight import Point
from pdctl.ops.storm import StormReport
from tests.unit.test_screen_widths import assert_fits_and_intact, assert_value_shown
from tests.unit.xpyd_reports import (
    BROKEN,
    BROKEN_FLAG,
    DECODES,
    LABELS,
    PREFILLS,
    ROUTERS,
    _metrics,
    health_4x4,
    status_4x4,
    triage_4x4,
)

INF = "sglang:num_prefill_inflight_queue_reqs"


@pytest.fixture(params=(80, 120))
def width(request, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(request.param))
    return request.param


def screen(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


def rows_of(lines: list[str], label: str) -> list[int]:
    """Indexes of the lines that start a row for `label` (the label first on the line, whole)."""
    return [i for i, line in enumerate(lines) if re.match(rf"\s*{re.escape(label)}(\s|$)", line)]


# -- status ---------------------------------------------------------------------------------------------------


def test_status_is_one_row_per_instance_with_the_verdict_first(width, capsys):
    render.status_table(status_4x4())
    lines = screen(capsys)
    assert lines[0] == "status: 9 of 10 running; stopped: decode[2]"
    assert_fits_and_intact(lines, width, LABELS + [f"pdctl-prod-decode-{i}.service" for i in range(4)])
    for k, label in enumerate(LABELS):
        (i,) = rows_of(lines, label)  # exactly one row per instance
        state = "stopped" if label == BROKEN else "running"
        assert state in lines[i] and (label == BROKEN or str(412000 + k) in lines[i]), lines[i]
    assert_value_shown(lines, "failed (Result: exit-code) since 2026-12-01 10:00:00")
    assert len(lines) <= 2 * len(LABELS) + 5  # two lines an instance (three for the stopped one)


def test_status_says_the_next_command_second_and_last(width, capsys):
    """A stopped decode: `pdctl deploy` right under the verdict and again on the last line, the verdict's count
    without the names; all running: no next command and no closing line."""
    from pdctl.checks.role_status import status_next_step

    rows = status_4x4()
    step = status_next_step(rows)
    assert step.startswith("pdctl deploy")
    render.status_table(rows, step)
    render.status_closing(rows, step)
    lines = screen(capsys)
    assert lines[1].startswith("next: pdctl deploy"), lines
    assert lines[-1] == "status: 9 of 10 running -- next: pdctl deploy", lines
    assert_fits_and_intact(lines, width, LABELS)
    running = status_4x4(stopped=False)
    assert status_next_step(running) == ""
    render.status_table(running, "")
    render.status_closing(running, "")
    assert not any("next:" in line for line in screen(capsys))


def test_status_leaves_out_the_columns_no_row_fills(monkeypatch, capsys):
    """Nothing runs: no pid and no uptime column, so each instance's detail has the room to stay on its row."""
    from pdctl.render.status import status_rows as cells

    from dataclasses import replace

    rows = [replace(r, active=False, pid=None, uptime_s=None, detail="not running (no pidfile)") for r in status_4x4()]
    assert all(c[3] == "" and c[4] == "" for c in cells(rows))
    monkeypatch.setenv("COLUMNS", "100")
    render.status_table(rows)
    header = next(line for line in screen(capsys) if line.startswith("role "))
    assert header.split() == ["role", "service", "state", "detail"], header


def test_status_all_running(width, capsys):
    render.status_table(status_4x4(stopped=False))
    lines = screen(capsys)
    assert lines[0] == "status: 10 of 10 running"
    assert all(len(rows_of(lines, label)) == 1 for label in LABELS)


# -- final-health ---------------------------------------------------------------------------------------------


def test_final_health_of_4x4_names_the_one_failing_decode_in_a_few_lines(width, capsys):
    render.health_report(health_4x4())
    lines = screen(capsys)
    text = "\n".join(lines)
    assert lines[0].startswith("final-health: FAIL (2 check(s) failed in: transfer, flags)")
    assert_fits_and_intact(
        lines,
        width,
        [
            BROKEN,
            BROKEN_FLAG,
            "sglang:num_transfer_failed_reqs_total",
            "(expected 0 on every rank)",
            "tp0=3",
            "(expected 0.85)",
            " 0.9",
            "transfer 15/16",
            "flags 59/60",
        ],
    )
    # the failing instance only: no passing instance is listed
    assert not any(label in text for label in LABELS if label != BROKEN)
    assert text.index(" 0.9") < text.index("layers:")
    assert len(lines) <= 23


def test_final_health_one_drift_on_every_decode_is_one_block(width, capsys):
    render.health_report(health_4x4(drift_everywhere=True))
    lines = screen(capsys)
    text = "\n".join(lines)
    assert lines[0].startswith("final-health: FAIL (5 check(s) failed in: transfer, flags)")
    assert_fits_and_intact(lines, width, DECODES + [BROKEN_FLAG, "on 4 of 8", "(expected 0.85)", " 0.9"])
    assert text.count(BROKEN_FLAG + " on 4") == 1 and text.count("(expected 0.85)") == 1  # once, not per decode
    assert not any(label in text for label in PREFILLS + ROUTERS)
    assert len(lines) <= 23


def test_final_health_same_check_different_values_one_row_each(width, capsys):
    rep = health_4x4(failed=False)
    for k, label in ((1, DECODES[1]), (3, PREFILLS[3])):
        fresh = judge_transfer(label, parse_metrics(_metrics(k)))
        rep.layers["transfer"] = [
            fresh[0] if r.target == label and r.name == fresh[0].name else r for r in rep.layers["transfer"]
        ]
    render.health_report(rep)
    lines = screen(capsys)
    assert lines[0].startswith("final-health: FAIL (2 check(s) failed in: transfer)")
    assert_fits_and_intact(lines, width, [DECODES[1], PREFILLS[3], "on 2 of 8", "(expected 0 on every rank)"])
    text = "\n".join(lines)
    for label, found in ((PREFILLS[3], "tp0=3"), (DECODES[1], "tp0=1")):  # each instance with what it found
        assert f"{label}: {found}" in " ".join(text.split()), text
    assert len(lines) <= 23


def test_final_health_verbose_is_one_row_per_instance_per_layer(width, capsys):
    from pdctl.checks.layers import layer_title

    rep = health_4x4()
    render.health_report(rep, verbose=True)
    lines = screen(capsys)
    text = "\n".join(lines)
    assert lines[0].startswith("final-health: FAIL")
    assert_fits_and_intact(
        lines,
        width,
        LABELS + ["--disaggregation-bootstrap-port", BROKEN_FLAG, "sglang:num_bootstrap_failed_reqs_total"],
    )
    starts = [text.index(layer_title(n) + "\n") for n in rep.layers] + [len(text)]
    for k, (layer, results) in enumerate(rep.layers.items()):
        section = text[starts[k] : starts[k + 1]].splitlines()
        for label in dict.fromkeys(r.target for r in results):
            assert len(rows_of(section, label)) == 1, (layer, label, section)
    flags = text[starts[3] : starts[4]]
    broken = flags[flags.index(BROKEN) :]
    assert broken.index("FAIL") < broken.index(f"{BROKEN_FLAG}: expected 0.85, found 0.9")
    assert len(lines) <= 150  # one block per check was over 400 lines


# -- triage ---------------------------------------------------------------------------------------------------


def test_triage_of_4x4_one_row_per_failing_instance(width, capsys):
    render.triage_report(triage_4x4())
    lines = screen(capsys)
    text = "\n".join(lines)
    assert lines[0].startswith("triage: ACTION NEEDED")
    assert_fits_and_intact(lines, width, [BROKEN, "`pdctl restart --pair`", "`pdctl logs decode`"])
    assert (
        lines[1] == "next: pdctl restart --pair" and lines[-1] == "triage: ACTION NEEDED -- next: pdctl restart --pair"
    )
    # one finding for the one cause: the routers' 7/8 readiness is the stopped decode's doing, said in it
    assert text.count("[action]") == 1 and "not running: decode[2]" in text
    flat = " ".join(text.split())
    assert all(f"{r} /readiness: 7/8 workers healthy" in flat for r in ROUTERS) and "connection refused" in flat
    assert not any(label in text for label in PREFILLS)  # passing instances counted, not listed
    assert len(lines) <= 23


def test_triage_verbose_merges_an_instances_observations_of_one_kind(width, capsys):
    render.triage_report(triage_4x4(stopped=False), verbose=True)
    lines = screen(capsys)
    assert lines[0].startswith("triage: HEALTHY")
    assert_fits_and_intact(lines, width, LABELS)
    health_rows = [line for line in lines if re.match(r"health\s", line)]
    assert len(health_rows) == len(LABELS)  # a router's /health and /readiness share its row
    text = "\n".join(lines)
    assert "/readiness: ready 8/8 workers healthy" in text


# -- storm ----------------------------------------------------------------------------------------------------


def _point(t: float, *, failed: float = 0.0, held: float = 0.0) -> Point:
    workers = PREFILLS + DECODES
    counters = {w: {"transfer_failed": failed if w == BROKEN else 0.0, "bootstrap_failed": 0.0} for w in workers}
    per_worker = {w: {INF: held if w == PREFILLS[1] else 0.0} for w in workers}
    return Point(
        t=t, gauges={INF: held}, generation_tokens=10.0 + t, per_worker=per_worker, counters=counters, gen_throughput={}
    )


def test_storm_of_4x4_names_the_failing_and_holding_workers(width, capsys):
    pts = [_point(-2.0), _point(0.0), _point(2.0, failed=2, held=1)] + [
        _point(2.5 + 0.5 * i, failed=3, held=1) for i in range(30)
    ]
    rep = StormReport(
        config={"requests": 8, "prompt_tokens": 3000, "target": "random"},
        router="http://r",
        points=pts,
        load_started_at=0.0,
        load_stopped_at=2.5,
        window=(0.6, 0.9),
    )
    rep.verdict = judge_watch([(p.t - 2.5, p.inflight, p.generation_tokens) for p in pts if p.t >= 2.5], 15.0)
    rep.holders = {PREFILLS[1]: {INF: 1.0}}
    rep.hits = HitReport({"hit": 1, "early": 5}, 6, 1, 1 / 6, 0.0, (0.6, 0.9))
    render.storm_report(rep)
    lines = screen(capsys)
    assert_fits_and_intact(lines, width, [BROKEN, PREFILLS[1], "prefill_inflight_queue=1"])
    (b,) = rows_of(lines, BROKEN)
    assert "+3" in lines[b]
    (h,) = rows_of(lines, PREFILLS[1])
    assert "prefill_inflight_queue=1" in lines[h] + lines[h + 1]
    assert any("other 6 worker(s): transfer_failed +0" in line for line in lines)
    assert not any(label in "\n".join(lines) for label in LABELS if label not in (BROKEN, PREFILLS[1]))
    verdict = max(i for i, x in enumerate(lines) if x.startswith("storm: "))
    assert lines[verdict].startswith("storm: FAIL") and verdict > h


def test_instance_rows_status_is_the_worst():
    from pdctl.render.tables import instance_rows

    rows = instance_rows(health_4x4().layers["transfer"])
    assert [r[0] for r in rows] == PREFILLS + DECODES
    assert {r[0]: r[1].plain for r in rows}[BROKEN] == "FAIL"
    assert sum(r[1].plain == "PASS" for r in rows) == 7
    assert all(Status.FAIL.value not in r[1].plain for r in rows if r[0] != BROKEN)


def test_status_headline_says_running_only_when_something_runs(width, capsys):
    rows = [
        RoleStatus(
            r.label,
            r.role,
            r.index,
            r.host,
            r.service,
            active=False,
            detail="ssh gpu-host-1.example.internal:22: timed out",
            error_exit_code=3,
            error="unreachable",
        )
        for r in status_4x4(stopped=False)
    ]
    render.status_table(rows)
    lines = screen(capsys)
    assert lines[0].startswith("status: 10 of 10 unknown: prefill[0], prefill[1]")
    assert "running" not in "\n".join(lines) and "stopped" not in "\n".join(lines)
    assert_fits_and_intact(lines, width, LABELS + ["router[1]"])


def test_final_health_failed_pairs_one_row_each_never_split(width, capsys):
    """The pairs layer of a 4x4 where prefill[1] reaches only decode[0]: one block, one row per broken pair with its
    own room; a pair's target ('prefill[1] -> decode[2]') is never split over lines."""
    from pdctl.checks.result import CheckResult
    from pdctl.ops.verify import HealthReport

    rows = []
    for i in range(4):
        for j in range(4):
            bad = i == 1 and j != 0
            rows.append(
                CheckResult(
                    "pairs",
                    f"prefill[{i}] -> decode[{j}]",
                    "canary",
                    Status.FAIL if bad else Status.PASS,
                    observed="no answer in 4.0s (aborted)" if bad else "200, KV 35 ms",
                    expected="HTTP 200 from both workers, content",
                    detail=f"{PREFILLS[i]} -> {DECODES[j]}, room {1000 + 4 * i + j}",
                )
            )
    render.health_report(HealthReport("prod-4x4.yaml", {"pairs": rows}))
    lines = screen(capsys)
    assert lines[0].startswith("final-health: FAIL (3 check(s) failed in: pairs)")
    broken = [f"prefill[1] -> decode[{j}]" for j in (1, 2, 3)]
    assert_fits_and_intact(lines, width, broken + ["on 3 of 16", "(expected HTTP 200"])
    text = "\n".join(lines)
    # one line for the one cause, every broken pair named whole, what they found once
    assert " ".join(text.split()).count("no answer in 4.0s (aborted)") == 1
    assert "prefill[0] -> " not in text and "prefill[1] -> decode[0]" not in text
    assert len(lines) <= 18
