"""The root's commands are imported and built when named (pdctl/cli/lazy_commands.py), and nothing about the CLI
changes for it: same names in the same order, same commands, same "Did you mean"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from pdctl.cli.app import COMMANDS, app
from pdctl.cli.common import PdctlCommand, PdctlGroup
from pdctl.cli.lazy_commands import CommandSummary, LazyCommands

REPO = Path(__file__).resolve().parents[2]


def test_names_in_order_and_a_command_built_on_first_lookup_only():
    cmds = LazyCommands(COMMANDS)
    assert list(cmds) == list(COMMANDS) and len(cmds) == len(COMMANDS) and "storm" in cmds
    assert isinstance(cmds.peek("storm"), CommandSummary)  # listed in the help: not built
    storm = cmds["storm"]
    assert isinstance(storm, PdctlCommand) and storm.name == "storm" and cmds["storm"] is storm
    assert cmds.peek("storm") is storm
    assert "--max-new-tokens" in {o for p in storm.params for o in p.opts}
    assert cmds.get("nosuch") is None
    with pytest.raises(KeyError):
        cmds["nosuch"]


def test_a_sub_app_is_listed_from_its_typer_help_and_built_as_a_group():
    cmds = LazyCommands(COMMANDS)
    summary = cmds.peek("verify")
    assert isinstance(summary, CommandSummary) and summary.help == "Read-only checks of a deployment."
    assert not summary.hidden and not summary.deprecated
    verify = cmds["verify"]
    assert isinstance(verify, PdctlGroup) and verify.name == "verify"
    assert list(verify.list_commands(None)) == ["inflight", "final-health", "pairs", "outputs"]
    assert not any("--install-completion" in p.opts for p in verify.params)


def test_every_command_builds_with_the_help_its_summary_promised():
    cmds = LazyCommands(COMMANDS)
    for name in COMMANDS:
        summary = cmds.peek(name)
        first = " ".join(summary.help.split("\n\n")[0].split())
        assert cmds[name].help.startswith(first), name


def test_did_you_mean_still_names_a_lazy_command():
    r = subprocess.run(
        [sys.executable, "-m", "pdctl", "strom"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert r.returncode == 2 and "Did you mean 'storm'?" in r.stderr


def test_the_root_group_lists_every_command():
    root = typer.main.get_command(app)
    assert root.list_commands(None) == list(COMMANDS)
