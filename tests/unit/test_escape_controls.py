"""A hostile string (a server's error body, a field of the audit log) reaches no terminal control by any way pdctl
prints: a Text of pdctl's, a str handed to the console, a table cell, a Text appended to. Each control character is
shown as its escape, before layout (rich would drop BEL and CR silently, so seeing `\\r` proves it was escaped
first, not caught by the console's after-layout guard)."""

from __future__ import annotations

import io

import rich.text
from rich.table import Table

from pdctl.render.escape_controls import Text, escape_controls
from pdctl.render.pdctl_console import PdctlConsole

HOSTILE = "a\x1b[2Jb\x07c\rd\u2028e\x1b]0;title\x07f"
SHOWN = "a\\x1b[2Jb\\x07c\\rd\\u2028e\\x1b]0;title\\x07f"


def _console(width: int = 120) -> tuple[PdctlConsole, io.StringIO]:
    out = io.StringIO()
    return PdctlConsole(file=out, force_terminal=False, width=width, color_system=None), out


def _assert_no_control(printed: str) -> None:
    assert all(ch == "\n" or ch.isprintable() for ch in printed), repr(printed)
    assert SHOWN in printed, repr(printed)


def test_escape_controls_keeps_newline_tab_and_printable_text():
    assert escape_controls(HOSTILE) == SHOWN
    assert escape_controls("line1\nline2\tx 日本") == "line1\nline2\tx 日本"


def test_a_text_built_by_pdctl():
    t = Text(HOSTILE, style="red")
    assert t.plain == SHOWN and len(t) == len(SHOWN)  # before layout: widths count the escapes
    c, out = _console()
    c.print(t)
    _assert_no_control(out.getvalue())


def test_a_plain_str_given_to_the_console():
    c, out = _console()
    c.print(HOSTILE)
    _assert_no_control(out.getvalue())


def test_markup_in_a_str_is_still_read():
    c, out = _console()
    c.print("[bold]x\x07[/bold] [link=y]z[/link]")
    assert out.getvalue() == "x\\x07 z\n"


def test_a_table_cell_given_as_str():
    table = Table("name", "detail")
    table.add_row("prefill-0", HOSTILE)
    c, out = _console()
    c.print(table)
    _assert_no_control(out.getvalue())


def test_a_text_appended_to():
    t = Text("error: ", style="bold red")
    t.append(HOSTILE)
    t.append_tokens([(HOSTILE, "dim")])
    assert t.plain == "error: " + SHOWN + SHOWN
    joined = Text("head ") + HOSTILE
    assert isinstance(joined, Text) and joined.plain == "head " + SHOWN
    c, out = _console(width=200)
    c.print(t)
    c.print(joined)
    _assert_no_control(out.getvalue())


def test_markup_and_copies_stay_escaped_and_pdctls():
    assert Text.from_markup(f"[bold]{HOSTILE}[/bold]").plain == SHOWN
    t = Text("x", style="bold")
    t.append("y", style="red")
    copy = t.copy()
    assert isinstance(copy, Text) and copy.spans == t.spans and copy.style == t.style
    copy.append("\x1b")
    assert copy.plain == "xy\\x1b"
    lines = Text(f"one\x07\ntwo{HOSTILE}").split()  # rich's own Text, of the already escaped text
    assert [line.plain for line in lines] == ["one\\x07", "two" + SHOWN]
    assert isinstance(Text(", ").join([Text("a"), Text("b")]), Text)


def test_a_text_of_richs_own_making_becomes_pdctls():
    source = rich.text.Text("plain", style="bold")
    source.stylize("red", 0, 2)
    mine = Text.of(source)
    assert isinstance(mine, Text) and mine.spans == source.spans and mine.style == "bold"
