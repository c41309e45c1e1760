"""`--report FILE.svg|FILE.html`: a read command saves what the screen showed (the verdict, a failed check, an
error line, a --json document), also when it exits non-zero; a bad suffix or an unwritable path is exit 2 before
the command runs."""

from __future__ import annotations

import html
import json
import re

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("PDCTL_OPERATOR", "unit-operator")
    monkeypatch.delenv("PDCTL_AUDIT_LOG", raising=False)
    monkeypatch.delenv("PDCTL_INVENTORY", raising=False)
    return tmp_path


def _audit_log(tmp):
    path = tmp / "state" / "pdctl" / "audit.jsonl"
    path.parent.mkdir(parents=True)
    recs = [
        {
            "time": "2025-01-01T00:00:00+0000",
            "operator": "oncall",
            "inventory": "<embedded default>",
            "action": a,
            "args": {},
            "result": r,
            "duration_s": 1.0,
        }
        for a, r in (("restart --pair", "ok"), ("storm", "not drained: inflight pinned at 3"))
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def _screen_text(path) -> str:
    """The text of an exported report, one line per screen line (SVG: <text> elements grouped by their y)."""
    doc = path.read_text()
    if path.suffix == ".svg":
        rows: dict[float, list[str]] = {}
        for y, t in re.findall(r'<text [^>]*?y="([\d.]+)"[^>]*>([^<]*)</text>', doc):
            rows.setdefault(float(y), []).append(html.unescape(t).replace("\xa0", " "))
        return "\n".join("".join(parts) for _y, parts in sorted(rows.items()))
    return html.unescape(re.sub(r"<[^>]+>", "", doc))


def _fake_final_health(monkeypatch, calls: list):
    from pdctl.checks.result import CheckResult, Status
    from pdctl.ops import verify

    def fake(dep, *, since_baseline, record, layers=()):
        calls.append(layers)
        return verify.HealthReport(
            dep.inv.source,
            {
                "health": [CheckResult("health", "router[0]", "/health", Status.PASS, observed="200")],
                "flags": [
                    CheckResult(
                        "flags",
                        "decode[0]",
                        "--disaggregation-transfer-backend",
                        Status.FAIL,
                        observed="mooncake",
                        expected="nixl",
                    )
                ],
            },
        )

    monkeypatch.setattr(verify, "final_health_with_baseline", fake)


@pytest.mark.parametrize("suffix", [".svg", ".html"])
def test_history_report_holds_the_screens_text(env, suffix):
    _audit_log(env)
    out = env / f"history{suffix}"
    r = CliRunner().invoke(app, ["history", "--report", str(out)])
    assert r.exit_code == 0, r.output
    text = _screen_text(out)
    assert "restart --pair" in text and "not drained: inflight pinned at 3" in text
    assert "restart --pair" in r.stdout  # the screen still shows it


@pytest.mark.parametrize("suffix", [".svg", ".html"])
def test_a_failed_final_health_is_saved_with_its_verdict_and_failed_check(env, monkeypatch, suffix):
    calls: list = []
    _fake_final_health(monkeypatch, calls)
    out = env / f"fh{suffix}"
    r = CliRunner().invoke(app, ["verify", "final-health", "--report", str(out)])
    assert r.exit_code == 1, r.output  # saved also when the check fails
    text = _screen_text(out)
    assert "final-health: FAIL" in text
    assert "--disaggregation-transfer-backend" in text and "mooncake" in text and "nixl" in text
    if suffix == ".svg":
        assert "pdctl verify final-health" in text  # the window title names the command


def test_an_error_line_is_in_the_report(env, monkeypatch):
    from pdctl.errors import UnreachableError
    from pdctl.ops import verify

    def unreachable(dep, **_kw):
        raise UnreachableError("ssh gpu-9: connection refused", target="gpu-9", hint="is sshd running on gpu-9?")

    monkeypatch.setattr(verify, "final_health_with_baseline", unreachable)
    out = env / "err.svg"
    r = CliRunner().invoke(app, ["verify", "final-health", "--report", str(out)])
    assert r.exit_code == 3, r.output
    text = _screen_text(out)
    assert "error: ssh gpu-9: connection refused" in text and "hint: is sshd running on gpu-9?" in text


def test_json_with_a_report_keeps_stdout_one_document_and_saves_it(env, monkeypatch):
    _fake_final_health(monkeypatch, [])
    out = env / "fh.html"
    r = CliRunner().invoke(app, ["verify", "final-health", "--json", "--report", str(out)])
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["ok"] is False
    assert '"--disaggregation-transfer-backend"' in _screen_text(out)


@pytest.mark.parametrize("name", ["report.txt", "report", "report.svg.bak"])
def test_a_bad_suffix_is_a_usage_error_naming_the_option(env, monkeypatch, name):
    calls: list = []
    _fake_final_health(monkeypatch, calls)
    r = CliRunner().invoke(app, ["verify", "final-health", "--report", str(env / name)])
    assert r.exit_code == 2, r.output
    assert "--report" in r.stderr and ".svg or .html" in r.stderr
    assert calls == [] and not (env / name).exists()


def test_an_unwritable_path_is_exit_2_naming_it_before_the_command_runs(env, monkeypatch):
    calls: list = []
    _fake_final_health(monkeypatch, calls)
    bad = env / "no-such-dir" / "fh.svg"
    r = CliRunner().invoke(app, ["verify", "final-health", "--report", str(bad), "--json"])
    assert r.exit_code == 2, r.output
    assert str(bad) in r.stderr and calls == []  # nothing was checked: the path failed first
    assert json.loads(r.stdout)["error"]["kind"] == "usage"
    a_dir = env / "dir.svg"
    a_dir.mkdir()
    r = CliRunner().invoke(app, ["history", "--report", str(a_dir)])
    assert r.exit_code == 2 and str(a_dir) in r.stderr


def test_a_usage_error_found_by_the_command_itself_is_in_the_report(env):
    out = env / "never.svg"
    r = CliRunner().invoke(app, ["verify", "inflight", "--window", "0", "--report", str(out)])
    assert r.exit_code == 2
    # the path was fine, the window was not: the usage error is in the report, written on the way out
    assert "--window" in _screen_text(out)


def test_render_report_holds_each_roles_command_line(env):
    out = env / "render.svg"
    r = CliRunner().invoke(app, ["render", "--role", "decode", "--report", str(out)])
    assert r.exit_code == 0, r.output
    text = _screen_text(out)
    assert "decode[0]" in text and "--disaggregation-mode" in text and "pdctl render" in text


def test_render_json_report_saves_the_document(env):
    out = env / "render.html"
    r = CliRunner().invoke(app, ["render", "--json", "--report", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["offline"] is True and '"offline": true' in _screen_text(out)


def _fake_lint(monkeypatch):
    from pdctl.checks.lint_report import LintReport
    from pdctl.checks.lint_rules import Finding
    from pdctl.ops import lint

    def fake(dep, role=None):
        return LintReport(
            [
                Finding(
                    "flag-ambiguous",
                    "decode[0]",
                    "--cuda-graph-max-bs",
                    "sglang 0.5.23: "
                    "--cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
                    "--cuda-graph-max-bs-prefill",
                    fix="write one of them",
                    version="0.5.23",
                )
            ]
        )

    monkeypatch.setattr(lint, "lint", fake)


@pytest.mark.parametrize("suffix", [".svg", ".html"])
def test_a_failed_lint_is_saved_with_its_finding(env, monkeypatch, suffix):
    _fake_lint(monkeypatch)
    out = env / f"lint{suffix}"
    r = CliRunner().invoke(app, ["lint", "--report", str(out)])
    assert r.exit_code == 1, r.output  # saved also when lint fails
    text = _screen_text(out)
    assert "flag-ambiguous" in text and "--cuda-graph-max-bs-prefill" in text and "0.5.23" in text


def test_lint_bad_report_suffix_is_usage_before_asking_any_host(env, monkeypatch):
    calls: list = []
    from pdctl.ops import lint

    monkeypatch.setattr(lint, "lint", lambda dep, role=None: calls.append(role))
    r = CliRunner().invoke(app, ["lint", "--report", str(env / "lint.txt"), "--json"])
    assert r.exit_code == 2 and calls == []
    assert json.loads(r.stdout)["error"]["kind"] == "usage"


def test_logs_report_holds_the_log_lines(env, monkeypatch):
    from pdctl.ops import lifecycle

    monkeypatch.setattr(
        lifecycle, "logs", lambda dep, role, index=0, lines=200: "decode started\nKVPoll.Failed room 7 [x]\n"
    )
    out = env / "logs.svg"
    r = CliRunner().invoke(app, ["logs", "decode", "--report", str(out)])
    assert r.exit_code == 0, r.output
    assert "KVPoll.Failed room 7 [x]" in r.stdout  # the screen still shows it
    text = _screen_text(out)
    assert "decode started" in text and "KVPoll.Failed room 7 [x]" in text  # markup-like text kept as is


def test_logs_usage_error_is_in_its_report(env):
    out = env / "logs.html"
    r = CliRunner().invoke(app, ["logs", "cache", "--report", str(out)])
    assert r.exit_code == 2
    assert "ROLE 'cache'" in _screen_text(out)
