"""The console every printer writes through: a control character in a segment of rich's own making (not a Text of
pdctl's) is shown as its escape, rich's control segments (cursor moves) pass, styles stay."""

from __future__ import annotations

import io

from rich.control import Control
from rich.segment import Segment

from pdctl.render.pdctl_console import PdctlConsole


class _RawSegments:
    """A renderable of its own making: its segments reach the console without a Text."""

    def __init__(self, *segments: Segment):
        self.segments = segments

    def __rich_console__(self, console, options):
        yield from self.segments


def _console() -> tuple[PdctlConsole, io.StringIO]:
    out = io.StringIO()
    return PdctlConsole(file=out, force_terminal=False, width=80, color_system=None), out


def test_a_raw_segment_cannot_drive_the_terminal():
    c, out = _console()
    c.print(_RawSegments(Segment("title\x1b]0;pwned\x07 end")))
    assert "\x1b" not in out.getvalue() and "\x07" not in out.getvalue()
    assert "title\\x1b]0;pwned\\x07 end" in out.getvalue()


def test_nested_renderables_are_escaped_too():
    from rich.panel import Panel

    c, out = _console()
    c.print(Panel(_RawSegments(Segment("a\rb"))))
    assert "\r" not in out.getvalue() and "a\\rb" in out.getvalue()


def test_control_segments_and_plain_text_pass_untouched():
    """The guard escapes text, never rich's own control segments (the live screen's cursor moves) nor plain text."""
    from pdctl.render.pdctl_console import _printable_segments

    plain, control = Segment("plain text"), Segment("\x1b[2K", None, [(1,)])
    assert list(_printable_segments([plain, control])) == [plain, control]
    c, out = _console()
    c.print(_RawSegments(plain))
    c.control(Control.move_to_column(0))
    assert out.getvalue().startswith("plain text")
