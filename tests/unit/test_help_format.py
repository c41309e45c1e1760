"""pdctl's own --help screen (pdctl/cli/help_format.py): typer's boxes and columns, wrapped to the terminal, no
name ever cut, env var / default / required notes where typer shows them, hidden things hidden."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.cli.common import PdctlCommand, PdctlGroup

REPO = Path(__file__).resolve().parents[2]


def _paths():
    root = typer.main.get_command(app)
    out = []

    def walk(cmd, path):
        out.append((path, cmd))
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(None):
                walk(cmd.get_command(None, name), path + [name])

    walk(root, [])
    return out


def _help(target, args, width):
    r = CliRunner().invoke(
        target, [*args, "--help"], prog_name="pdctl", env={"COLUMNS": str(width)}, terminal_width=width
    )
    assert r.exit_code == 0, r.output
    return r.output


def _whole(word: str, text: str) -> bool:
    """`word` appears with no letter, digit or hyphen glued to either side (so not cut, not part of another)."""
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


@pytest.mark.parametrize("width", [80, 50])
@pytest.mark.parametrize("path,cmd", _paths(), ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_every_help_fits_the_width_and_shows_every_option_whole(path, cmd, width):
    out = _help(app, path, width)
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= width, out
    assert all(len(ln) == width for ln in lines if ln[:1] in "╭│╰" and ln), out  # box edges line up
    ctx = typer.Context(cmd, info_name=path[-1] if path else "pdctl")
    for p in cmd.get_params(ctx):
        for name in [*p.opts, *p.secondary_opts] if p.param_type_name == "option" else [p.name]:
            assert _whole(name, out), (name, out)
    if any("--inventory" in p.opts for p in cmd.get_params(ctx)):
        assert "[env var: PDCTL_INVENTORY]" in out


def test_defaults_required_and_ranges_where_typer_shows_them():
    storm = _help(app, ["storm"], 80)
    assert "[default: 90]" in storm and "[default: transfer-window]" not in storm and "[default: random]" in storm
    assert "[default: False]" not in storm and "[default: None]" not in storm  # unset flags and options: none
    run = _help(app, ["run"], 80)
    assert "{playbook}" in run.splitlines()[1] and "[required]" in run and "│ *    playbook" in run
    logs = _help(app, ["logs"], 80)
    assert "<int range> [x>=1]" in logs


def test_commands_box_lists_every_command_with_its_first_help_paragraph():
    out = _help(app, [], 80)
    box = out[out.index("╭─ Commands") :]
    names = [ln.split()[1] for ln in box.splitlines() if ln.startswith("│ ") and ln[2] != " "]
    assert names == list(typer.main.get_command(app).list_commands(None))
    assert "Run an abort storm through the router and check that inflight" in box
    assert "Streaming requests" not in box  # storm's second paragraph stays on its own screen


def _toy():
    """A group with a hidden option, a hidden command, a deprecated command and a \\b paragraph."""
    toy = typer.Typer(cls=PdctlGroup, rich_markup_mode=None, add_completion=False)

    @toy.command("shown", cls=PdctlCommand)
    def shown(
        secret: Annotated[bool, typer.Option("--secret-knob", hidden=True)] = False,
        count: Annotated[int, typer.Option("--count", help="How many.")] = 3,
    ) -> None:
        """First paragraph of shown, long enough to be wrapped at a narrow width by the help formatter.

        \b
        kept: one
        kept: two
        """

    @toy.command("ghost", cls=PdctlCommand, hidden=True)
    def ghost() -> None:
        """Never listed."""

    @toy.command("old", cls=PdctlCommand, deprecated=True)
    def old() -> None:
        """An old command."""

    return toy


def test_hidden_stays_hidden_deprecated_is_said_and_b_paragraphs_keep_their_lines():
    toy = _toy()
    group = _help(toy, [], 80)
    assert "ghost" not in group and "old" in group and "(deprecated)" in group
    shown = _help(toy, ["shown"], 60)
    assert "--secret-knob" not in shown and _whole("--count", shown) and "[default: 3]" in shown
    lines = shown.splitlines()
    assert " kept: one" in lines and " kept: two" in lines  # not joined into one line
    assert max(len(ln) for ln in lines) <= 60


def test_columns_sets_the_width_of_a_real_run():
    for width in (72, 100):
        r = subprocess.run(
            [sys.executable, "-m", "pdctl", "verify", "--help"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "COLUMNS": str(width)},
        )
        assert r.returncode == 0 and r.stderr == ""
        top = next(ln for ln in r.stdout.splitlines() if ln.startswith("╭─ Options"))
        assert len(top) == width


def test_pdctl_alone_prints_the_help_on_stdout_and_exits_2():
    r = subprocess.run(
        [sys.executable, "-m", "pdctl"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert r.returncode == 2 and r.stderr == ""
    assert r.stdout.splitlines()[1] == " Usage: pdctl [OPTIONS] COMMAND [ARGS]..." and "╭─ Commands" in r.stdout
