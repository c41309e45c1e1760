"""More screens at 60, 80 and 120 columns (continued from test_screen_widths_more.py): render, lint, a playbook run,
the watch, the kept SSH connections, history with long records, and the xPyD screens of test_xpyd_screens.py at 60
(the ones whose 80-column layout bounds do not apply at 60 are asserted here on content: nothing wider than the
terminal, no label cut, each failed check's expected and found shown)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pdctl import render
from pdctl.checks.result import CheckResult, Status
from pdctl.cli.app import app
from tests.unit.test_screen_widths import FLAG, assert_fits_and_intact, assert_value_shown, screen, width  # noqa: F401
from tests.unit.test_screen_widths_more import H_D, H_P, _state, label, no_line_wider  # noqa: F401


# -- render (offline) -----------------------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "seed-production.yaml"


def test_render_seed_example_headers_fit_and_nothing_is_cut(width):
    from pdctl import launch
    from pdctl.inventory import load_inventory
    from pdctl.services.systemd import render_unit

    r = CliRunner().invoke(app, ["render", "-i", str(EXAMPLE)])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    inv = load_inventory(EXAMPLE)
    # a command line, env line and unit line stay one line on purpose (copied, grepped, diffed); the rest fits
    kept_whole = [x for x in lines if x.startswith(("  command: ", "  env: ", "    "))]
    assert_fits_and_intact(
        [x for x in lines if x not in kept_whole], width, ["rendered offline: no host was contacted", "(declared)"]
    )
    assert "…" not in r.stdout
    for role, i, _ in inv.instances():
        spec = launch.service_spec(inv, role, i)
        assert any(x.startswith(inv.label(role, i) + " ") for x in lines), inv.label(role, i)
        assert f"  /etc/systemd/system/{spec.name}.service:" in lines
        assert "  command: " + " ".join(spec.argv) in lines or any(
            x.startswith("  command: ") and spec.argv[-1] in x for x in lines
        )
        for line in render_unit(spec).splitlines():
            assert ("    " + line).rstrip() in [x.rstrip() for x in lines], line


def test_render_default_python_note_is_wrapped_prose(width):
    """The embedded default declares no interpreter: the note saying so is prose, wrapped under the python line
    (the interpreter's path stays whole on its line), not one ~170-column line."""
    from pdctl.render.units import DEFAULT_PYTHON_NOTE

    r = CliRunner().invoke(app, ["render"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    for k, line in enumerate(lines):
        if not line.startswith("  python: "):
            continue
        assert len(line) <= width or " " not in line[len("  python: ") :], line
        note = [line[len("  python: ") :].split("  ", 1)[-1]] if "  (" in line else []
        for more in lines[k + 1 :]:
            if more.startswith("  ") and not more.startswith("    "):
                break
            assert len(more) <= width, more
            note.append(more.strip())
        assert " ".join(note) == "(" + DEFAULT_PYTHON_NOTE.format(host="local") + ")"


# -- lint -----------------------------------------------------------------------------------------------------


def lint_report(failing: bool):
    from pdctl.checks.lint_report import LintReport
    from pdctl.checks.lint_rules import Finding

    who = "sglang 0.5.23 on gpu-dc-02.us-east-2.compute.internal"
    findings = [
        Finding(
            "tp-rank0-metrics",
            label("prefill", 0),
            "--enable-metrics-for-all-schedulers",
            "tp 8 without it: only rank 0's scheduler reports",
            version="0.5.23",
        )
    ]
    if failing:
        findings += [
            Finding(
                "flag-ambiguous",
                label("decode", 0),
                "--disaggregation-b",
                f"{who}: --disaggregation-b could match --disaggregation-bootstrap-port, --disaggregation-backend",
                fix="write one of --disaggregation-bootstrap-port, --disaggregation-backend",
                data={"candidates": ["--disaggregation-bootstrap-port", "--disaggregation-backend"]},
            ),
            Finding(
                "env-value",
                label("decode", 0),
                "SGLANG_DISAGGREGATION_WAITING_TIMEOUT",
                "expected an int, found 'thirty'",
                fix="SGLANG_DISAGGREGATION_WAITING_TIMEOUT=300",
            ),
        ]
    roles = [
        {"label": label(r, 0), "kind": "sglang", "version": "0.5.23", "python": "/opt/sglang/venv/bin/python"}
        for r in ("prefill", "decode")
    ]
    return LintReport(findings, roles)


@pytest.mark.parametrize("failing", [False, True])
def test_lint_report_rule_role_subject_and_what_to_write(width, capsys, failing):
    render.lint_report(lint_report(failing))
    lines = screen(capsys)
    assert lines[0].startswith("lint: FAIL (2 error(s), 1 note(s)" if failing else "lint: PASS (1 note(s))")
    note = [label("prefill", 0), "tp-rank0-metrics", "--enable-metrics-for-all-schedulers"]
    idents = [label("decode", 0)] + ([] if failing else note)
    if failing:
        idents += [
            "flag-ambiguous",
            "--disaggregation-b",
            "--disaggregation-bootstrap-port,",
            "--disaggregation-backend",
            "env-value",
            "SGLANG_DISAGGREGATION_WAITING_TIMEOUT",
            "fix: SGLANG_DISAGGREGATION_WAITING_TIMEOUT=300",
        ]
    assert_fits_and_intact(lines, width, idents)
    if failing:
        text = "\n".join(lines)
        assert len(lines) <= 23, text  # one screen: the note and the versions go first, and are said to
        render.lint_report(lint_report(failing), verbose=True)
        full = screen(capsys)
        assert_fits_and_intact(full, width, note)  # -v: all of it
        assert "\n".join(full).index("ERROR flag-ambiguous") < "\n".join(full).index("NOTE tp-rank0")  # errors first
        # the first error's fix second, and again with the verdict last
        assert lines[1].startswith("next: decode[0] --disaggregation-b: write one")
        flat = " ".join(text.split())
        assert flat.endswith("then pdctl lint") and "-- next: decode[0]" in flat
        assert_value_shown(full, "expected an int, found 'thirty'")
        assert_value_shown(lines, "fix: write one of --disaggregation-bootstrap-port, --disaggregation-backend")


def test_lint_drops_a_note_whole_at_any_height():
    """However few rows are left, a note's message never stays without its heading (it goes whole), while an
    error's heading and fix always stay."""
    from pdctl.render.lint import lint_screen

    screen = lint_screen(lint_report(True), 80)
    for rows in range(4, 40):
        text = "\n".join(r.text for r in screen.fit(rows))
        assert ("NOTE tp-rank0-metrics" in text) == ("only rank 0's scheduler reports" in text), (rows, text)
        assert "ERROR flag-ambiguous" in text and "fix: SGLANG_DISAGGREGATION_WAITING_TIMEOUT=300" in text


# -- a playbook run -------------------------------------------------------------------------------------------

STEP = "check-the-decode-transfer-backend-is-mooncake"
PLAYBOOK = {
    "name": "check-the-decode-before-the-change-window",
    "steps": [
        {
            "name": STEP,
            "action": "shell",
            "args": {"role": "decode", "command": "echo --disaggregation-transfer-backend nixl; exit 3"},
            "gate": {"exit_code": [0, 1]},
        }
    ],
}


def test_playbook_plan_and_a_failed_gate(width, tmp_path):
    import yaml

    p = tmp_path / "pb.yaml"
    p.write_text(yaml.safe_dump(PLAYBOOK))
    dry = CliRunner().invoke(app, ["run", str(p), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert_fits_and_intact(dry.stdout.splitlines(), width, [STEP, "shell", "decode[0]:", "exit_code:", "stop"])
    r = CliRunner().invoke(app, ["run", str(p)])
    assert r.exit_code == 1, r.output
    out, err = r.stdout.splitlines(), r.stderr.splitlines()
    # the step, its gate: what it wanted (0 or 1) and what it found (exit code 3)
    assert_fits_and_intact(out, width, [STEP, "failed", "--disaggregation-transfer-backend"])
    assert_value_shown(out, "exit code 3 (want 0 or 1)")
    no_line_wider(err, width)
    assert any(STEP in x for x in err) and "gate: exit code 3 (want 0 or 1)" in " ".join(err)
    verdict = " ".join(x.strip() for x in out[-4:])
    assert "FAIL (exit 1)" in verdict and f"'{STEP}'" in verdict


# -- the watch ------------------------------------------------------------------------------------------------


def watch_state():
    from pdctl.checks.watch_state import WatchState

    st = WatchState("prod-west-2x2", started=1_700_000_000.0)
    first = st.apply_checks(
        "fast",
        [
            CheckResult("health", label(r, 0), "/health", Status.PASS, "200", "200")
            for r in ("prefill", "decode", "router")
        ],
        1_700_000_001.0,
    )
    later = st.apply_checks(
        "slow",
        [
            CheckResult("flags", label("decode", 0), FLAG, Status.FAIL, observed="9999", expected="8998"),
            CheckResult(
                "transfer",
                label("decode", 0),
                "sglang:num_transfer_failed_reqs_total",
                Status.FAIL,
                observed="tp0=3 tp1=0",
                expected="0 on every rank",
            ),
        ],
        1_700_000_010.0,
        unknown={label("router", 1): "ssh gpu-dc-02.us-east-2.compute.internal:22: timed out"},
    )
    later += st.apply_hazards({(label("prefill", 0), label("decode", 0)): "decode-restarted-alone"}, 1_700_000_011.0)
    st.round_done("fast", 1_700_000_012.0, 1.25)
    return st, first + later


def test_watch_change_lines(width, capsys):
    from pdctl.render.watch_screen import ChangeLines

    _, lines = watch_state()
    ChangeLines()(lines)
    out = screen(capsys)
    assert_fits_and_intact(
        out,
        width,
        [
            label("decode", 0),
            FLAG,
            "sglang:num_transfer_failed_reqs_total",
            label("router", 1),
            "decode-restarted-alone",
            "PASS health: 3 checks",
        ],
    )
    assert_value_shown(out, "expected 8998; found 9999")
    assert_value_shown(out, "expected 0 on every rank; found tp0=3 tp1=0")


def test_watch_live_screen(width, capsys):
    from pdctl.render.watch_screen import screen_text

    st, _ = watch_state()
    render.console().print(screen_text(st, 1_700_000_020.0))
    out = screen(capsys)
    assert out[0].startswith("watch prod-west-2x2: FAIL")
    assert_fits_and_intact(
        out,
        width,
        [
            label("decode", 0),
            FLAG,
            "sglang:num_transfer_failed_reqs_total",
            label("router", 1),
            "decode-restarted-alone",
        ],
    )
    text = "\n".join(out)
    assert text.index(FLAG) < text.index("expected 8998") and "found 9999" in text
    assert_value_shown(out, "expected 0 on every rank; found tp0=3 tp1=0")


# -- ssh keep list --------------------------------------------------------------------------------------------


def test_ssh_kept_connections(width, capsys):
    from pdctl.transport.control import KeptConnection
    from pdctl.render.ssh import kept_table

    d = "/home/operator-on-call/.local/state/pdctl/ssh"
    rows = [
        KeptConnection(H_P, f"{d}/{H_P}.sock", 600.0, "kept", 41234, "ubuntu@10.0.0.1:22", True, 42.0, 558.0),
        KeptConnection(H_D, f"{d}/{H_D}.sock", 0.0, "none"),
        KeptConnection("gpu-3", f"{d}/gpu-3.sock", 600.0, "not answering", 999),
    ]
    kept_table(rows, d)
    lines = screen(capsys)
    assert_fits_and_intact(lines, width, [H_P, H_D, "not answering", "41234", "9m18s", "42s", f"{H_P}.sock", d])
    assert any(H_D in x for x in lines if "keeping is off" in x) or "keeping is off for" in "\n".join(lines)


# -- history with long records --------------------------------------------------------------------------------


def test_history_long_records(width, monkeypatch, tmp_path):
    log = tmp_path / "state" / "pdctl" / "audit.jsonl"
    log.parent.mkdir(parents=True)
    inv = "/srv/deployments/production/us-east-2/dsv4-prefill-decode-2x2-inventory.yaml"
    recs = [
        {
            "time": "2025-01-01T00:00:00+0000",
            "operator": "alexandra.on-call-secondary@example.com",
            "inventory": inv,
            "action": "restart --rolling --drain-timeout 120",
            "result": f"stopped: stopped at step 'unit 2: wait {label('decode', 1)} ready': not ready after 600s",
            "duration_s": 1612.5,
        },
        {
            "time": "2025-01-01T01:00:00+0000",
            "operator": "bob",
            "inventory": inv,
            "action": "run playbooks/recover-pinned-inflight.yaml",
            "result": "ok",
            "duration_s": 95.0,
        },
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    r = CliRunner().invoke(app, ["history"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    no_line_wider(lines, width)
    for ident in (
        "alexandra.on-call-secondary@example.com",
        "restart --rolling --drain-timeout 120",
        "run playbooks/recover-pinned-inflight.yaml",
        "1612.5",
        "2025-01-01T00:00:00+0000",
    ):
        assert any(ident in x for x in lines), (ident, r.stdout)
    # the inventory path whole: on one line, or folded onto the next ones (it was cut on the left: "…/dsv4-...")
    assert "".join(x.strip() for x in lines).count(inv) == 2 and "…/" not in r.stdout, r.stdout
    assert not any(re.search(r"\w…\w", x) for x in lines)  # a cut, if any, is at the end of a cell


# -- the xPyD screens at 60 -----------------------------------------------------------------------------------

# layout bounds made for 80 columns (a line count, a pid on the label's line): asserted below on content at 60
AT_80_ONLY = {
    "test_final_health_failed_pairs_one_row_each_never_split",
    "test_final_health_same_check_different_values_one_row_each",
    "test_final_health_verbose_is_one_row_per_instance_per_layer",
    "test_status_is_one_row_per_instance_with_the_verdict_first",
    "test_triage_of_4x4_one_row_per_failing_instance",
    "test_triage_verbose_merges_an_instances_observations_of_one_kind",
}


def _xpyd_tests():
    import inspect

    from tests.unit import test_xpyd_screens as xpyd

    return [
        f
        for n, f in sorted(vars(xpyd).items())
        if n.startswith("test_") and n not in AT_80_ONLY and "width" in inspect.signature(f).parameters
    ]


@pytest.mark.parametrize("test", _xpyd_tests(), ids=lambda f: f.__name__)
def test_xpyd_screens_at_60(test, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "60")
    test(60, capsys)


@pytest.fixture
def at60(monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")


def test_xpyd_status_at_60(at60, capsys):
    from tests.unit.xpyd_reports import LABELS, status_4x4

    render.status_table(status_4x4())
    lines = screen(capsys)
    assert lines[0] == "status: 9 of 10 running; stopped: decode[2]"
    assert_fits_and_intact(lines, 60, LABELS + [f"pdctl-prod-decode-{i}.service" for i in range(4)])
    for k, lab in enumerate(LABELS):
        (i,) = [i for i, x in enumerate(lines) if x.startswith(lab + " ")]  # one row per instance
        assert ("stopped" if lab == "decode[2]@gpu-host-3.example.internal:30002" else "running") in lines[i]
    assert_value_shown(lines, "failed (Result: exit-code) since 2026-12-01 10:00:00")


@pytest.mark.parametrize("verbose", [False, True])
def test_xpyd_final_health_at_60(at60, capsys, verbose):
    from tests.unit.xpyd_reports import BROKEN, BROKEN_FLAG, LABELS, health_4x4

    render.health_report(health_4x4(), verbose=verbose)
    lines = screen(capsys)
    assert lines[0].startswith("final-health: FAIL (2 check(s) failed in: transfer, flags)")
    assert_fits_and_intact(
        lines,
        60,
        [BROKEN, BROKEN_FLAG, "sglang:num_transfer_failed_reqs_total"]
        + (LABELS if verbose else ["(expected 0.85)", " 0.9", "tp0=3"]),
    )
    if verbose:
        assert_value_shown(lines, f"{BROKEN_FLAG}: expected 0.85, found 0.9")


def test_xpyd_failed_pairs_and_triage_at_60(at60, capsys):
    from tests.unit.xpyd_reports import BROKEN, ROUTERS, triage_4x4

    from pdctl.checks.result import CheckResult as CR
    from pdctl.ops.verify import HealthReport
    from tests.unit.xpyd_reports import DECODES, PREFILLS

    rep = HealthReport(
        "prod-4x4.yaml",
        {
            "pairs": [
                CR(
                    "pairs",
                    f"prefill[{i}] -> decode[{j}]",
                    "canary",
                    Status.FAIL if (i == 1 and j) else Status.PASS,
                    observed="no answer in 4.0s (aborted)" if (i == 1 and j) else "200, KV 35 ms",
                    expected="HTTP 200 from both workers, content",
                    detail=f"{PREFILLS[i]} -> {DECODES[j]}, room {1004 + j}",
                )
                for i in range(4)
                for j in range(4)
            ]
        },
    )
    render.health_report(rep)
    lines = screen(capsys)  # one line for the one cause, every pair named whole
    assert_fits_and_intact(lines, 60, [f"prefill[1] -> decode[{j}]" for j in (1, 2, 3)] + ["(expected HTTP 200"])
    render.health_report(rep, verbose=True)
    lines = screen(capsys)  # -v: each pair's own room and workers
    assert_fits_and_intact(
        lines,
        60,
        [f"prefill[1] -> decode[{j}]  no answer in 4.0s (aborted)" for j in (1, 2, 3)]
        + [PREFILLS[1], DECODES[3], "expected: HTTP 200 from both workers, content"],
    )
    assert all(f"{1004 + j}" in "\n".join(lines) for j in (1, 2, 3))
    render.triage_report(triage_4x4())
    lines = screen(capsys)
    assert lines[0].startswith("triage: ACTION NEEDED")
    assert_fits_and_intact(
        lines, 60, [BROKEN, *ROUTERS, "`pdctl restart --pair`", "`pdctl logs decode`", "what passed"]
    )
    assert len(lines) <= 23 and lines[-1] == "triage: ACTION NEEDED -- next: pdctl restart --pair"
    assert_value_shown(lines, "/readiness: 7/8 workers healthy")
    render.triage_report(triage_4x4(stopped=False), verbose=True)
    lines = screen(capsys)
    assert lines[0].startswith("triage: HEALTHY") and sum("/readiness: ready 8/8" in x for x in lines) == 2
