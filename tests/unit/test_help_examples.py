"""`--help` of storm, watch, restart and run starts with examples (issue 30): two or three real command lines, each
with what it does, right under the summary, so they are on the first lines of an 80-column screen; each example
parses as the command line it shows (every option and value exists)."""

from __future__ import annotations

import shlex

import pytest
import typer
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.cli.help_format import EXAMPLES_HEAD, example_lines

COMMANDS = ["storm", "watch", "restart", "run"]
FIRST_LINES = 12  # blank, usage, blank, a summary of up to two lines, blank, the heading and three examples


def _help(command: str, width: int) -> list[str]:
    r = CliRunner().invoke(
        app, [command, "--help"], prog_name="pdctl", env={"COLUMNS": str(width)}, terminal_width=width
    )
    assert r.exit_code == 0, r.output
    return r.output.splitlines()


def _examples(lines: list[str]) -> list[tuple[str, str]]:
    """(command, what it does) of each example under the heading, at a width where each is one line."""
    start = [ln.strip() for ln in lines].index(EXAMPLES_HEAD)
    out = []
    for ln in lines[start + 1 :]:
        if not ln.strip():
            break
        command, _, what = ln.partition("  # ")
        out.append((command.strip(), what.strip()))
    return out


@pytest.mark.parametrize("command", COMMANDS)
def test_examples_come_first_at_80_columns(command):
    lines = _help(command, 80)
    assert all(len(ln) <= 80 for ln in lines)
    head = [ln.strip() for ln in lines[:FIRST_LINES]]
    assert EXAMPLES_HEAD in head, "\n".join(lines[:FIRST_LINES])
    examples = _examples(lines)
    assert 2 <= len(examples) <= 3, examples
    assert head.index(EXAMPLES_HEAD) + len(examples) < FIRST_LINES  # every example on the first lines
    for cmd, what in examples:
        assert cmd.startswith(f"pdctl {command}"), cmd
        assert len(what) >= 10, (cmd, what)  # says what it does
    # the comments aligned in one column
    assert len({ln.index("  # ") for ln in lines if ln.startswith("   pdctl ")}) == 1, lines
    # the long description still follows, after the examples
    usage = next(i for i, ln in enumerate(lines) if ln.strip().startswith("Usage:"))
    assert usage < head.index(EXAMPLES_HEAD)


@pytest.mark.parametrize("command", COMMANDS)
def test_each_example_parses_as_the_command_line_it_shows(command):
    """Every option and value of an example is one the command takes (parsed as click parses it; nothing runs)."""
    root = typer.main.get_command(app)
    for line, _ in _examples(_help(command, 80)):
        argv = shlex.split(line)
        assert argv[:2] == ["pdctl", command]
        ctx = typer.Context(root, info_name="pdctl")
        cmd = root.get_command(ctx, command)
        with cmd.make_context(command, argv[2:], parent=ctx) as sub:
            assert not sub.args, (line, sub.args)  # nothing left over


def test_a_narrow_screen_puts_each_comment_under_its_command_never_cutting_one():
    lines = _help("restart", 50)
    assert all(len(ln) <= 50 for ln in lines)
    start = [ln.strip() for ln in lines].index(EXAMPLES_HEAD)
    block = lines[start + 1 : start + 7]
    assert [ln.strip().startswith("pdctl restart") for ln in block] == [True, False] * 3, block
    assert all(ln.strip().startswith("# ") for ln in block[1::2]), block


def test_example_lines_align_when_they_fit_and_stack_when_not():
    given = ["pdctl x  # one", "pdctl x --long-option  # two things", "pdctl x --bare"]
    column = len("pdctl x --long-option")
    assert example_lines(given, 80) == [
        "   " + "pdctl x".ljust(column) + "  # one",
        "   pdctl x --long-option  # two things",
        "   pdctl x --bare",
    ]
    narrow = example_lines(given, 30)
    assert narrow == [
        "   pdctl x",
        "     # one",
        "   pdctl x --long-option",
        "     # two things",
        "   pdctl x --bare",
    ]
