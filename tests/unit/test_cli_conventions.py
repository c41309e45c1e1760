"""CLI conventions (issue 10, item 4): --version, -h everywhere, flags shown as flags, help that wraps to the
terminal, one error style for click's usage errors and pdctl's own, hints chosen from what failed, and shell
completion that bash really loads."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from pdctl.cli.app import app

REPO = Path(__file__).resolve().parents[2]
ENV = {"COLUMNS": "80", "TERM": "dumb", "NO_COLOR": "1", "_TYPER_FORCE_DISABLE_TERMINAL": "1"}


def _invoke(args, width=80):
    return CliRunner().invoke(app, args, prog_name="pdctl", env={**ENV, "COLUMNS": str(width)}, terminal_width=width)


def _commands():
    """(path, click command) of every command and group, root included."""
    root = typer.main.get_command(app)
    out = []

    def walk(cmd, path):
        out.append((path, cmd))
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(None):
                walk(cmd.get_command(None, name), path + [name])

    walk(root, [])
    return out


def _pdctl(args, env=None, timeout=30):
    e = {**os.environ, **ENV, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "pdctl", *args], cwd=REPO, env=e, capture_output=True, text=True, timeout=timeout
    )


def test_version_is_the_package_version():
    import tomllib

    want = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    r = _pdctl(["--version"])
    assert r.returncode == 0 and r.stdout.strip() == f"pdctl {want}"


@pytest.mark.parametrize("path", [p for p, _ in _commands()], ids=lambda p: " ".join(p) or "pdctl")
def test_dash_h_is_help_on_every_command_and_no_flag_shows_a_value_placeholder(path):
    r = _invoke([*path, "-h"])
    assert r.exit_code == 0, r.output
    assert f"Usage: pdctl {' '.join(path)}".rstrip() in r.output
    assert "<bool>" not in r.output
    assert "--help" in r.output and "-h" in r.output


def test_flags_stay_flags_and_valued_options_keep_their_placeholder():
    r = _invoke(["verify", "inflight", "-h"], width=120)
    line = {ln.split()[1]: ln for ln in r.output.splitlines() if ln.strip().startswith("│ --")}
    assert "<float>" in line["--window"]
    assert "<" not in line["--json"].split("Print")[0]  # nothing between the flag and its help


@pytest.mark.parametrize("path", [["triage"], ["storm"], ["verify", "inflight"]], ids=" ".join)
def test_help_paragraphs_wrap_to_the_terminal_not_where_the_source_broke_them(path):
    cmd = dict((tuple(p), c) for p, c in _commands())[tuple(path)]
    source = inspect.getdoc(cmd.callback)
    assert "\n" in source.split("\n\n")[0] or any("\n" in p for p in source.split("\n\n")[1:])
    wide = _invoke([*path, "--help"], width=400).output
    lines = [ln.strip(" │") for ln in wide.splitlines()]
    for para in source.split("\n\n"):
        if para.startswith("\b"):  # a paragraph that keeps its lines, as in click (the examples): not reflowed
            continue
        text = " ".join(para.split())
        assert any(text in ln for ln in lines), f"paragraph broken in help: {text!r}"


def test_usage_errors_are_said_in_pdctls_style_without_boxes():
    cases = [
        (["deploy", "--bogus"], "No such option: --bogus", "pdctl deploy --help"),
        (["logs"], "Missing argument 'role'", "pdctl logs --help"),
        (["verify", "inflight", "--window", "abc"], "'--window'", "pdctl verify inflight --help"),
        (["nosuch"], "No such command 'nosuch'", "pdctl --help"),
    ]
    for args, message, hint in cases:
        r = _pdctl(args)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.startswith("error: ") and message in " ".join(r.stderr.split()), (args, r.stderr)
        assert r.stderr.splitlines()[-1] == f"hint: run `{hint}`", (args, r.stderr)
        assert "╭" not in r.stderr and "Usage:" not in r.stderr and r.stdout == ""


def test_usage_error_with_json_is_one_error_document_on_stdout():
    r = _pdctl(["triage", "--json", "--interval", "soon"])
    assert r.returncode == 2
    doc = json.loads(r.stdout)
    assert doc["ok"] is False
    assert doc["error"]["exit_code"] == 2 and doc["error"]["kind"] == "usage"
    assert "--interval" in doc["error"]["message"] and doc["error"]["hint"] == "run `pdctl triage --help`"


def test_pdctl_usage_error_under_json_is_one_error_document():
    r = _invoke(["restart", "--json"])  # neither --pair nor --role: pdctl's own UsageError
    assert r.exit_code == 2
    doc = json.loads(r.stdout)
    assert doc == {
        "ok": False,
        "error": {
            "exit_code": 2,
            "kind": "usage",
            "message": doc["error"]["message"],
            "hint": "run `pdctl restart --help`",
        },
    }
    assert "--pair" in doc["error"]["message"]


# -- hints chosen from what failed ------------------------------------------------------------------------------


def _next(failures):
    from pdctl.render import next_steps

    return next_steps({"flags": [r for r in failures if r.failed]})


def test_flag_or_env_drift_hints_deploy_dry_run_then_deploy():
    from pdctl.checks.flags import judge_flags

    flag = judge_flags("decode[0]", ["x", "--tp", "2"], {}, {"--tp": 4}, {})
    env = judge_flags("decode[0]", [], {"NCCL_DEBUG": "WARN"}, {}, {"NCCL_DEBUG": "INFO", "UCX_TLS": "tcp"})
    for results in (flag, env):
        (step,) = _next(results)
        assert step.startswith("pdctl deploy --dry-run") and step.rstrip().endswith("then pdctl deploy")


def test_transfer_failures_hint_triage_and_lineage_hints_pair_restart():
    from pdctl.checks.metrics import parse_metrics
    from pdctl.checks.result import NEXT_PAIR_RESTART, CheckResult, Status
    from pdctl.checks.transfer import judge_transfer

    text = (
        '# TYPE sglang:num_transfer_failed_reqs_total counter\nsglang:num_transfer_failed_reqs_total{tp_rank="0"} 3\n'
    )
    steps = _next(judge_transfer("prefill[0]", parse_metrics(text)))
    assert steps and steps[0].startswith("pdctl triage")
    lineage = CheckResult("lineage", "decode[0]", "restart lineage", Status.FAIL, next_step=NEXT_PAIR_RESTART)
    assert _next([lineage]) == ["pdctl restart --pair"]


def test_a_refused_health_probe_hints_status_beside_the_other_hints():
    from pdctl.checks.health import probe_health
    from pdctl.checks.result import NEXT_DEPLOY, CheckResult, Status
    from tests.fixtures.net import free_port

    down = probe_health(f"http://127.0.0.1:{free_port()}", "/health", 2.0)  # nothing listens there
    assert down.failed and "refused" in down.observed
    assert _next([down])[0].startswith("pdctl status")
    drift = CheckResult("flags", "decode[0]", "--x", Status.FAIL, next_step=NEXT_DEPLOY)
    assert [s.split()[1] for s in _next([drift, down])] == ["deploy", "status"]


# -- completion -------------------------------------------------------------------------------------------------


@pytest.fixture
def pdctl_on_path(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "pdctl"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m pdctl "$@"\n')
    shim.chmod(0o755)
    return {**os.environ, **ENV, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(REPO)}


def test_bash_loads_the_completion_script_and_completes_commands_and_options(pdctl_on_path):
    script = (
        "source <(pdctl --show-completion) && complete -p pdctl && "
        'COMP_WORDS=(pdctl ver) COMP_CWORD=1 && _pdctl_completion pdctl && echo "1:${COMPREPLY[*]}" && '
        "COMP_WORDS=(pdctl verify final-health --j) COMP_CWORD=3 && _pdctl_completion pdctl && "
        'echo "2:${COMPREPLY[*]}"'
    )
    r = subprocess.run(["bash", "-c", script], env=pdctl_on_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0].startswith("complete ") and out[0].endswith(" pdctl")
    assert "1:verify" in out and "2:--json" in out


@pytest.mark.parametrize(
    "shell,marker", [("zsh", "compdef _pdctl_completion pdctl"), ("fish", "complete --command pdctl")]
)
def test_zsh_and_fish_scripts_are_generated_and_answered(pdctl_on_path, shell, marker):
    # typer picks the shell from the parent process; this variable makes it take the shell as an argument
    gen = subprocess.run(
        ["pdctl", "--show-completion", shell],
        capture_output=True,
        text=True,
        timeout=30,
        env={**pdctl_on_path, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"},
    )
    assert gen.returncode == 0 and marker in gen.stdout
    extra = {"_TYPER_COMPLETE_FISH_ACTION": "get-args"} if shell == "fish" else {}
    ans = subprocess.run(
        ["pdctl"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**pdctl_on_path, "_PDCTL_COMPLETE": f"complete_{shell}", "_TYPER_COMPLETE_ARGS": "pdctl tri", **extra},
    )
    assert ans.returncode == 0 and "triage" in ans.stdout


def test_an_interrupt_says_what_the_action_left_out(capsys):
    """A rolling restart interrupted after it restarted prefill[1] and before it put it back: the error says which
    workers stay out of the routers (it was only in the audit record)."""
    from pdctl.cli.common import _run_mapped

    def interrupted_rolling():
        from pdctl.errors import Interrupted

        raise Interrupted(notes=["still out of the routers: prefill[1]@local:41001 (restarted, not put back)"])

    with pytest.raises(typer.Exit) as ex:
        _run_mapped(interrupted_rolling, (), {}, False)
    assert ex.value.exit_code == 130
    err = capsys.readouterr().err
    assert "interrupted by SIGINT" in err and "still out of the routers: prefill[1]@local:41001" in err, err
