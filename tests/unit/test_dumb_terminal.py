"""Issue 28, C5: a 40-column tty with TERM=dumb got 80-column tables with box drawing (rich takes every dumb terminal
to be 80x25). On a real pty of a set size: the console lays out for the terminal's own width (or the one asked for)
and draws in ASCII; `pdctl status` on such a pty, a real process, stays within 40 columns in ASCII."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

from pdctl.render.layout import Col, grid, stacked
from pdctl.render.line_art import ascii_line_art
from pdctl.render.pdctl_console import PdctlConsole
from tests.e2e.helpers import REPO

COLS = [Col("role", ident=True, head=True), Col("state", head=True), Col("detail")]
ROWS = [["prefill[0]@local:30000", "stopped", "not running (no pidfile)"]] * 2


def _pty(cols: int) -> tuple[int, int]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    return master, slave


def _read_all(master: int) -> str:
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the other side closed
            break
        if not chunk:
            break
        out += chunk
    return out.decode()


def _print_on_pty(cols: int, term: str, renderable, monkeypatch, **kw) -> tuple[PdctlConsole, str]:
    monkeypatch.setenv("TERM", term)
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    master, slave = _pty(cols)
    with open(slave, "w", closefd=True) as f:
        c = PdctlConsole(file=f, highlight=False, soft_wrap=False, **kw)
        c.print(renderable)
    text = _read_all(master)
    os.close(master)
    return c, text


def test_a_dumb_40_column_tty_gets_40_columns_of_ascii(monkeypatch):
    c, text = _print_on_pty(40, "dumb", stacked("roles", COLS, ROWS, 40), monkeypatch)
    assert c.width == 40
    lines = text.replace("\r\n", "\n").splitlines()
    assert lines and max(len(line) for line in lines) <= 40 and text.isascii()
    assert "-" * 10 in text  # the rule under the header, in ASCII


@pytest.mark.parametrize("term", ["dumb", "unknown"])
def test_a_width_asked_for_is_kept_and_rich_boxes_are_ascii(term, monkeypatch):
    """The variant: pdctl passes $COLUMNS as the width; rich dropped it on a dumb terminal too. A rich Panel (its
    own box) comes out in ASCII of the same shape."""
    from rich.panel import Panel

    c, text = _print_on_pty(100, term, Panel("inside", width=30), monkeypatch, width=60)
    assert c.width == 60 and text.isascii()
    lines = [line for line in text.replace("\r\n", "\n").splitlines() if line]
    assert lines[0] == "+" + "-" * 28 + "+" and lines[1].startswith("| inside") and len(lines[1]) == 30


def test_a_capable_terminal_keeps_its_line_drawing(monkeypatch):
    c, text = _print_on_pty(100, "xterm", grid("roles", COLS, ROWS, 100), monkeypatch, color_system=None, width=100)
    assert c.width == 100 and not c.ascii_art and "─" in text


def test_ascii_line_art_keeps_every_width():
    drawn = "╭─ x ─╮│▕██░░▏▁▂▇█└┼┘═║"
    flat = ascii_line_art(drawn)
    assert flat.isascii() and len(flat) == len(drawn)
    assert flat == "+- x -+||##..|__##+++=|"
    assert ascii_line_art("prefill[0] → ok ✓ 東京") == "prefill[0] → ok ✓ 東京"  # only drawing changes


def test_pdctl_status_on_a_dumb_40_column_pty(tmp_path):
    master, slave = _pty(40)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "PDCTL_INVENTORY")}
    env.update(TERM="dumb", XDG_STATE_HOME=str(tmp_path))
    p = subprocess.Popen(
        [sys.executable, "-m", "pdctl", "status"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    text = _read_all(master)
    os.close(master)
    assert p.wait(timeout=60) == 1, text  # nothing deployed: every role stopped
    lines = text.replace("\r\n", "\n").splitlines()
    assert lines[0].startswith("status:") and max(len(line) for line in lines) <= 40, text
    assert text.isascii() and "\x1b" not in text


@pytest.mark.parametrize("term, ascii_boxes", [("dumb", True), ("xterm", False)])
def test_help_on_a_40_column_pty_keeps_its_width_and_a_dumb_one_gets_ascii_boxes(term, ascii_boxes, tmp_path):
    """--help is drawn without rich (cli/help_format.py): on a dumb pty its boxes are ASCII of the same width too;
    a capable terminal keeps the rounded boxes."""
    master, slave = _pty(40)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(TERM=term, XDG_STATE_HOME=str(tmp_path))
    p = subprocess.Popen(
        [sys.executable, "-m", "pdctl", "verify", "--help"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    text = _read_all(master)
    os.close(master)
    assert p.wait(timeout=60) == 0, text
    lines = text.replace("\r\n", "\n").splitlines()
    assert max(len(line) for line in lines) <= 40, text
    assert "Commands" in text
    assert text.isascii() is ascii_boxes and ("+- Commands" in text) is ascii_boxes, text
