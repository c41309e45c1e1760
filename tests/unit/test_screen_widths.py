"""Every command's screen at 60, 80 and 120 columns, pass and fail: the verdict comes first, each failed check's
name, expected and found value are on the screen, and no identifier (role label, port, metric name, flag) is cut or
split. Content assertions on typed results rendered by pdctl.render (the console reads COLUMNS), and the CLI through
typer's CliRunner where it needs no deployment."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from pdctl import render
from pdctl.checks.inflight import judge_inflight, judge_points
from pdctl.checks.result import CheckResult, Status
from pdctl.checks.role_status import RoleStatus
from pdctl.checks.storm import HitReport, judge_watch
from pdctl.checks.triage import Finding, Observation
from pdctl.ops.inflight import InflightReport, Point
from pdctl.ops.storm import StormReport
from pdctl.ops.triage import TriageReport
from pdctl.ops.verify import HealthReport

WIDTHS = (60, 80, 120)
DECODE = "decode[0]@gpu-host-2.example.internal:30002"
PREFILL = "prefill[0]@gpu-host-1.example.internal:30000"
ROUTER = "router[0]@gpu-host-1.example.internal:30001"
FLAG = "--disaggregation-bootstrap-port"
ENV_FLAG = "--disaggregation-transfer-backend"
INF = "sglang:num_prefill_inflight_queue_reqs"
XFER = "sglang:num_decode_transfer_queue_reqs"
LONG_EXPECTED = "nixl --disaggregation-ib-device mlx5_0,mlx5_1,mlx5_2,mlx5_3 --mem-fraction-static 0.82"
LONG_FOUND = "mooncake --disaggregation-ib-device mlx5_0 --mem-fraction-static 0.9 --chunked-prefill-size 8192"


@pytest.fixture(params=WIDTHS)
def width(request, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", str(request.param))
    return request.param


def screen(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


def assert_fits_and_intact(lines: list[str], width: int, identifiers) -> None:
    """Nothing wider than the terminal, nothing cut with an ellipsis, each identifier whole on one line."""
    assert all(len(line.rstrip()) <= width for line in lines), [x for x in lines if len(x.rstrip()) > width]
    text = "\n".join(lines)
    assert "…" not in text
    for ident in identifiers:
        assert any(ident in line for line in lines), f"{ident!r} cut or missing at {width}:\n{text}"


def assert_value_shown(lines: list[str], value: str) -> None:
    """A long value may wrap, but at spaces only: every word of it is whole on some line, in order."""
    words = value.split()
    joined = " ".join(" ".join(line.split()) for line in lines)
    for w in words:
        assert any(w in line for line in lines), w
    assert " ".join(words) in joined or all(w in joined for w in words)


def health(failed: bool) -> HealthReport:
    flags = [
        CheckResult("flags", PREFILL, f"--flag-number-{i}", Status.PASS, observed="on", expected="on")
        for i in range(15)
    ]
    if failed:
        flags[3] = CheckResult(
            "flags",
            DECODE,
            FLAG,
            Status.FAIL,
            observed="9999",
            expected="8998",
            detail="drift: the live command line differs from the inventory",
            next_step="pdctl deploy --dry-run",
        )
        flags[4] = CheckResult(
            "flags", DECODE, ENV_FLAG, Status.FAIL, observed=LONG_FOUND, expected=LONG_EXPECTED, detail="drift"
        )
    return HealthReport(
        "prod.yaml",
        {
            "health": [
                CheckResult("health", r, "/health", Status.PASS, observed="200 in 2 ms", expected="200")
                for r in (PREFILL, DECODE, ROUTER)
            ],
            "transfer": [
                CheckResult(
                    "transfer", DECODE, "sglang:num_transfer_failed_reqs_total", Status.PASS, observed="0", expected="0"
                )
            ],
            "flags": flags,
        },
    )


def test_final_health_fail_shows_the_verdict_then_each_failed_check(width, capsys):
    render.health_report(health(failed=True))
    lines = screen(capsys)
    assert lines[0].startswith("final-health: FAIL (2 check(s) failed in: flags)")
    assert lines[1] == "next: pdctl deploy --dry-run"  # the one next command, second
    assert lines[-1] == "final-health: FAIL -- next: pdctl deploy --dry-run"  # and again last, after any scroll
    assert_fits_and_intact(lines, width, [DECODE, FLAG, ENV_FLAG, "(expected 8998)", "9999", "flags 13/15"])
    text = "\n".join(lines)
    # each failed check on a line of its own: its name, the instance, what was found, then what was expected
    assert text.index(FLAG) < text.index("9999") < text.index("(expected 8998)") < text.index("layers:")
    assert_value_shown(lines, LONG_EXPECTED)
    assert_value_shown(lines, LONG_FOUND)
    # passing checks are counted per layer, not listed
    assert "--flag-number-0" not in text and "health 3/3" in text and "transfer 1/1" in text
    assert len(lines) <= 23  # 24 rows with the prompt


def test_final_health_verbose_lists_every_check_without_cutting(width, capsys):
    render.health_report(health(failed=True), verbose=True)
    lines = screen(capsys)
    assert lines[0].startswith("final-health: FAIL")
    idents = [PREFILL, DECODE, ROUTER, FLAG, "sglang:num_transfer_failed_reqs_total"] + [
        f"--flag-number-{i}" for i in (0, 1, 2, 5, 14)
    ]
    assert_fits_and_intact(lines, width, idents)


def test_final_health_pass_is_short(width, capsys):
    render.health_report(health(failed=False))
    lines = screen(capsys)
    assert lines[0] == "final-health: PASS"
    assert_fits_and_intact(lines, width, ["flags     15/15 pass"])
    assert len(lines) <= 6 and "failed checks" not in "\n".join(lines)


def test_verify_final_health_cli_verbose_option(width, monkeypatch, tmp_path):
    """Through the CLI: without --verbose the passing checks are one line per layer; -v lists them."""
    from pdctl.ops import verify

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setattr(verify, "final_health_with_baseline", lambda dep, **kw: health(failed=True))
    from pdctl.cli.app import app

    short = CliRunner().invoke(app, ["verify", "final-health"])
    assert short.exit_code == 1, short.output
    lines = short.stdout.splitlines()
    assert lines[0].startswith("final-health: FAIL")
    assert_fits_and_intact(lines, width, [DECODE, FLAG, "8998", "9999"])
    assert "--flag-number-0" not in short.stdout
    long = CliRunner().invoke(app, ["verify", "final-health", "-v"])
    assert long.exit_code == 1 and "--flag-number-0" in long.stdout


def status_rows(long_detail: bool) -> list[RoleStatus]:
    return [
        RoleStatus(
            PREFILL, "prefill", 0, "gpu-host-1", "pdctl-prefill-0.service", active=True, pid=412345, uptime_s=86400.0
        ),
        RoleStatus(
            DECODE,
            "decode",
            0,
            "gpu-host-1",
            "pdctl-decode-0.service",
            active=False,
            detail="exited 1 at 2025-01-01T00:00:00 (see pdctl logs decode)" if long_detail else "",
        ),
        RoleStatus(
            ROUTER,
            "router",
            0,
            "gpu-host-1",
            "pdctl-router-0.service",
            active=False,
            detail="ssh gpu-host-1.example.internal:22: timed out",
            error_exit_code=3,
            error="unreachable",
        ),
    ]


@pytest.mark.parametrize("long_detail", [False, True])
def test_status_never_cuts_a_label_or_a_state(width, capsys, long_detail):
    render.status_table(status_rows(long_detail))
    lines = screen(capsys)
    assert_fits_and_intact(
        lines,
        width,
        [
            PREFILL,
            DECODE,
            ROUTER,
            "pdctl-decode-0.service",
            "running",
            "stopped",
            "unknown",
            "412345",
            "86400s",
            "gpu-host-1.example.internal:22:",
        ],
    )


def test_history_never_cuts_the_operator_or_the_action(width, monkeypatch, tmp_path):
    log = tmp_path / "pdctl" / "audit.jsonl"
    log.parent.mkdir(parents=True)
    recs = [
        {
            "time": "2025-01-01T00:00:00+0000",
            "operator": "operator-on-call",
            "inventory": "/etc/pdctl/prod.yaml",
            "action": "restart --role decode",
            "result": "failed: decode[0] did not become ready in 600s",
            "duration_s": 612.5,
        },
        {
            "time": "2025-01-01T01:00:00+0000",
            "operator": "operator-on-call",
            "inventory": "/etc/pdctl/prod.yaml",
            "action": "restart --pair",
            "result": "ok",
            "duration_s": 95.0,
        },
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.delenv("PDCTL_AUDIT_LOG", raising=False)
    from pdctl.cli.app import app

    r = CliRunner().invoke(app, ["history"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert all(len(x.rstrip()) <= width for x in lines)
    for ident in (
        "operator-on-call",
        "restart --role decode",
        "restart --pair",
        "2025-01-01T00:00:00+0000",
        "612.5",
        "prod.yaml",
    ):
        assert any(ident in x for x in lines), (ident, r.stdout)
    assert "did not become ready" in r.stdout


def test_history_measures_cjk_in_terminal_cells(width, monkeypatch, tmp_path):
    """An operator or inventory path in CJK takes two cells a character: counted in characters, the table ran past
    the terminal's width."""
    from rich.cells import cell_len

    log = tmp_path / "pdctl" / "audit.jsonl"
    log.parent.mkdir(parents=True)
    recs = [
        {
            "time": "2025-01-01T00:00:00+0000",
            "operator": "当番のオペレーター",
            "inventory": "/etc/pdctl/本番環境/推論.yaml",
            "action": "restart --pair",
            "result": "ok",
            "duration_s": 95.0,
        }
    ]
    log.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.delenv("PDCTL_AUDIT_LOG", raising=False)
    from pdctl.cli.app import app

    r = CliRunner().invoke(app, ["history"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert all(cell_len(x.rstrip()) <= width for x in lines), r.stdout
    assert any("当番のオペレーター" in x for x in lines) and any("推論.yaml" in x for x in lines), r.stdout


def triage_rep(healthy: bool) -> TriageReport:
    obs = [
        Observation("service", DECODE, Status.PASS, "pdctl-decode-0.service: active (pid 4242)"),
        Observation("health", "local:22000", Status.PASS, "/health: 200 in 2 ms"),
        Observation(
            "inflight",
            "prefill+decode",
            Status.PASS if healthy else Status.FAIL,
            f"{INF} pinned at 3 for 30.0s with no decode progress",
        ),
        Observation(
            "transfer failures (window)",
            "prefill+decode",
            Status.PASS,
            "transfer_failed +0, bootstrap_failed +0 over 30.0s",
        ),
    ]
    findings = (
        []
        if healthy
        else [
            Finding(
                "requests pinned in the prefill inflight queue",
                "action",
                [f"{INF} = 3 on {PREFILL} for 30.0s"],
                ["a KV transfer race"],
                "pdctl restart --pair",
            )
        ]
    )
    return TriageReport("prod.yaml", obs, findings)


@pytest.mark.parametrize("healthy", [True, False])
def test_triage_headline_first_and_ports_never_split(width, capsys, healthy):
    render.triage_report(triage_rep(healthy), verbose=True)
    lines = screen(capsys)
    assert lines[0].startswith("triage: HEALTHY" if healthy else "triage: ACTION NEEDED")
    assert_fits_and_intact(lines, width, ["local:22000", DECODE, "prefill+decode", INF, "PASS"])


@pytest.mark.parametrize("healthy", [True, False])
def test_triage_counts_passing_observations_unless_verbose(width, capsys, healthy):
    render.triage_report(triage_rep(healthy))
    lines = screen(capsys)
    assert lines[0].startswith("triage: HEALTHY" if healthy else "triage: ACTION NEEDED")
    assert "PASS" not in "\n".join(lines)  # passing rows are counted, not listed
    assert_fits_and_intact(lines, width, ["passed:", "service 1/1", "transfer failures (window) 1/1"])
    if not healthy:  # what did not pass named in one line; the verdict again last
        assert_fits_and_intact(lines, width, ["prefill+decode", INF, "not passed: inflight"])
        assert lines[-1] == "triage: ACTION NEEDED"


def pt(t, inflight=0.0, failed=0.0, gen=10.0):
    return Point(
        t=t,
        gauges={INF: inflight, XFER: 0.0},
        generation_tokens=gen,
        per_worker={"prefill[0]": {INF: inflight}},
        counters={"prefill[0]": {"transfer_failed": failed, "bootstrap_failed": 0.0}},
        gen_throughput={},
    )


@pytest.mark.parametrize("stuck", [False, True])
def test_storm_columns_and_chart(width, capsys, stuck):
    pts = [pt(-6.39), pt(0.0, 5), pt(1.01, 4, 2), pt(2.73, 1 if stuck else 0)] + [
        pt(2.73 + 0.5 * i, 1 if stuck else 0, 2) for i in range(1, 40)
    ]
    rep = StormReport(
        config={"requests": 8, "prompt_tokens": 3000, "target": "random"},
        router="http://r",
        points=pts,
        load_started_at=0.0,
        load_stopped_at=2.73,
        window=(1.8, 2.7),
    )
    rep.verdict = judge_watch([(p.t - 2.73, p.inflight, p.generation_tokens) for p in pts if p.t >= 2.73], 19.0)
    rep.hits = HitReport({"hit": 3, "early": 5}, 8, 3, 3 / 8, 0.0, (1.8, 2.7))
    render.storm_report(rep)
    lines = screen(capsys)
    assert_fits_and_intact(
        lines, width, ["transfer_failed", "inflight per sample: max 5", "transfer_failed per sample: max 2"]
    )
    verdict = max(i for i, x in enumerate(lines) if x.startswith("storm: "))  # last: it may wrap
    assert lines[verdict].startswith("storm: FAIL" if stuck else "storm: PASS")
    assert verdict > max(i for i, x in enumerate(lines) if "per sample: max" in x)


@pytest.mark.parametrize("pinned", [False, True])
def test_verify_inflight_samples_chart_and_verdict(width, capsys, pinned):
    pts = [pt(float(t), 3.0 if pinned else 0.0) for t in range(0, 31)]
    v = judge_inflight([(p.t, p.gauges, p.generation_tokens) for p in pts], 30.0)
    render.inflight_report(InflightReport(30.0, 1.0, pts, v))
    lines = screen(capsys)
    text = "\n".join(lines)
    assert_fits_and_intact(lines, width, ["prefill", "generation", f"inflight per sample: max {3 if pinned else 0}"])
    assert (
        lines[-1].startswith("verify inflight: PINNED" if pinned else "verify inflight: DRAINED")
        or "verify inflight: PINNED" in text
    )
    if pinned:  # the verdict and the command first and last; 31 samples alike: the table keeps the changes
        assert "FAIL" in text and "found:" in text
        assert lines[0] == "verify inflight: PINNED" and lines[1] == "next: pdctl triage"
        assert lines[-1] == "verify inflight: PINNED -- next: pdctl triage"
        assert "29 like the one before not listed" in " ".join(text.split())
        assert len(lines) <= (24 if width >= 80 else 40)


def test_verify_inflight_pinned_under_load_reads_at_every_width(width, capsys):
    # steady load (counts move, tokens flow) with one room the prefill alone holds: the room-balance verdict
    pts = [
        Point(
            t=float(t),
            gauges={INF: 1.0 + t % 2, XFER: float(t % 2)},
            generation_tokens=8.0 * t,
            per_worker={"prefill[0]@gpu-host-1:30000": {INF: 1.0 + t % 2}},
            counters={},
            gen_throughput={},
            prefill_rooms=1.0 + t % 2,
            decode_rooms=float(t % 2),
        )
        for t in range(31)
    ]
    v, _ = judge_points(pts, 30.0)
    render.inflight_report(InflightReport(30.0, 1.0, pts, v))
    lines = screen(capsys)
    text = " ".join(x.strip() for x in lines)
    assert_fits_and_intact(lines, width, ["prefill[0]@gpu-host-1:30000", "generation"])
    assert "verify inflight: PINNED" in text and "pinned under load" in text and "restart --pair" in text


@pytest.mark.parametrize("detail", ["none", "short", "long"])
def test_status_measures_cjk_host_names_in_terminal_cells(width, capsys, detail):
    """A CJK character takes two cells: a label counted in characters got a column too narrow, and lost its port."""
    from rich.cells import cell_len

    rows = [
        dataclasses.replace(r, label=r.label.split("@")[0] + "@日本語ホスト:" + r.label.rsplit(":", 1)[1])
        for r in status_rows(detail == "long")
    ]
    if detail == "none":  # every row short: the table layout, not the stacked one
        rows = [
            dataclasses.replace(
                r, detail="", error=None, error_exit_code=None, service=r.service.removesuffix(".service")
            )
            for r in rows
        ]
    render.status_table(rows)
    lines = screen(capsys)
    assert all(cell_len(x.rstrip()) <= width for x in lines), [x for x in lines if cell_len(x.rstrip()) > width]
    assert "…" not in "\n".join(lines)
    for r in rows:
        assert any(r.label in x for x in lines), (r.label, "\n".join(lines))


def test_status_lock_line_keeps_the_holders_command_whole(width, capsys):
    """`deployment lock held by ...` wrapped inside `restart --rolling` at 80 columns: a word and its --option stay
    on one line."""
    held = "on-call-engineer-with-a-long-name (restart --rolling, pid 4123456 on gpu-host-1.example.internal, for 12s)"
    for pad in range(0, 40, 3):  # wherever the line would break
        render.wrapped(f"deployment lock held by {'x' * pad}{held}: a change is under way", style="yellow")
    lines = screen(capsys)
    assert_fits_and_intact(lines, width, ["restart --rolling,", "gpu-host-1.example.internal,"])
    assert sum("restart --rolling" in line for line in lines) == len(range(0, 40, 3))
