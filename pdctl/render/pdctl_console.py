"""The console class every printer writes through: rich's, with pdctl's answer to a reader that goes away, a last
guard against text that would drive the terminal, and a dumb terminal's real width with ASCII line drawing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator, Optional, Union

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

if TYPE_CHECKING:
    from rich.console import HighlighterType, JustifyMethod, OverflowMethod

from pdctl.render.escape_controls import escape_controls
from pdctl.render.line_art import ascii_line_art, terminal_size


def _printable_segments(buffer: Iterable[Segment], ascii_art: bool = False) -> Iterator[Segment]:
    """After layout, the last line of defence: text that reached the console without pdctl's escaping (a renderable
    of rich's own making: a panel title, a progress column) gets its control characters escaped too; rich's control
    segments (the live screen's cursor moves) and styles pass untouched. `ascii_art`: line drawing becomes ASCII
    of the same width (a dumb terminal)."""
    for seg in buffer:
        text = seg.text
        if seg.control or not text:
            yield seg
            continue
        if ascii_art and not text.isascii():
            text = ascii_line_art(text)
        if not text.isprintable():
            text = escape_controls(text)
        yield seg if text is seg.text else Segment(text, seg.style, seg.control)


class PdctlConsole(Console):
    """rich's console, except when the reader of its output goes away (`pdctl ... | head`): the rest is dropped and
    the command goes on to its verdict (pdctl/broken_pipe.py), where rich would exit 1, pdctl's "a check failed".
    And no text it prints can carry a terminal control sequence: a str it is handed (`print("...")`, a table cell, a
    rule's title) is escaped before layout, like pdctl's Text (render/escape_controls.py), and every segment once
    more after layout.

    On a dumb terminal (TERM=dumb or unknown) rich lays out for 80x25 whatever the terminal's size, even a width it
    is given: this console lays out for the real size (the width asked for, $COLUMNS, else the terminal's) and
    draws lines, boxes and bars in ASCII."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ascii_art = self.is_dumb_terminal
        if self.ascii_art:
            try:
                fd: int | None = self.file.fileno()
            except (AttributeError, ValueError, OSError):  # a stream without a descriptor
                fd = None
            self.size = terminal_size(fd, kwargs.get("width"), kwargs.get("height"))

    def on_broken_pipe(self) -> None:
        from pdctl.broken_pipe import drop_rest_of_output

        self.quiet = True
        drop_rest_of_output()

    def render(self, renderable: RenderableType, options: Optional[ConsoleOptions] = None) -> Iterable[Segment]:
        # rich's public hook every printed renderable passes through (nested ones too), after their layout
        return _printable_segments(super().render(renderable, options), self.ascii_art)

    def render_str(
        self,
        text: str,
        *,
        style: Union[str, Style] = "",
        justify: Optional[JustifyMethod] = None,
        overflow: Optional[OverflowMethod] = None,
        emoji: Optional[bool] = None,
        markup: Optional[bool] = None,
        highlight: Optional[bool] = None,
        highlighter: Optional[HighlighterType] = None,
    ) -> Text:
        # rich's public hook for every str it is handed: escaped before its markup is read and before layout, so
        # widths count the escapes (an escape ends in a letter or digit: never a `\` that would escape a `[`)
        return super().render_str(
            escape_controls(text),
            style=style,
            justify=justify,
            overflow=overflow,
            emoji=emoji,
            markup=markup,
            highlight=highlight,
            highlighter=highlighter,
        )
