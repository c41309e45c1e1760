"""The console class every printer writes through: rich's, with pdctl's answer to a reader that goes away, and a
last guard against text that would drive the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.segment import Segment


def _printable_segments(buffer):
    """rich strips only BEL, BS, VT, FF and CR from text; an ESC from a server's error body or a host's answer
    would still recolour, clear or retitle the operator's terminal. Text segments get every other control
    character escaped here (`\\x1b`), after layout; rich's own control segments (the live screen's cursor moves)
    and styles pass untouched. Renderers that escape a value before layout (terminal_safe) keep their widths."""
    from pdctl.render.terminal_safe import printable

    for seg in buffer:
        text = seg.text
        if seg.control or text.isprintable() or not text:
            yield seg
        else:
            yield Segment("\n".join(printable(part) for part in text.split("\n")), seg.style, seg.control)


class PdctlConsole(Console):
    """rich's console, except when the reader of its output goes away (`pdctl ... | head`): the rest is dropped and
    the command goes on to its verdict (pdctl/broken_pipe.py), where rich would exit 1, pdctl's "a check failed".
    And no text it prints can carry a terminal control sequence (`_printable_segments`)."""

    def on_broken_pipe(self) -> None:
        from pdctl.broken_pipe import drop_rest_of_output

        self.quiet = True
        drop_rest_of_output()

    def _render_buffer(self, buffer) -> str:
        return super()._render_buffer(_printable_segments(buffer))
