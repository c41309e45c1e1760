"""The console class every printer writes through: rich's, with pdctl's answer to a reader that goes away, and a
last guard against text that would drive the terminal."""

from __future__ import annotations

from typing import Iterable, Iterator, Optional

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from pdctl.render.escape_controls import escape_controls


def _printable_segments(buffer: Iterable[Segment]) -> Iterator[Segment]:
    """After layout: text that reached the console without a Text of pdctl's (a renderable of rich's own making)
    gets its control characters escaped too (render/escape_controls.py escapes every Text before layout); rich's
    control segments (the live screen's cursor moves) and styles pass untouched."""
    for seg in buffer:
        text = seg.text
        if seg.control or text.isprintable() or not text:
            yield seg
        else:
            yield Segment(escape_controls(text), seg.style, seg.control)


class PdctlConsole(Console):
    """rich's console, except when the reader of its output goes away (`pdctl ... | head`): the rest is dropped and
    the command goes on to its verdict (pdctl/broken_pipe.py), where rich would exit 1, pdctl's "a check failed".
    And no text it prints can carry a terminal control sequence."""

    def on_broken_pipe(self) -> None:
        from pdctl.broken_pipe import drop_rest_of_output

        self.quiet = True
        drop_rest_of_output()

    def render(self, renderable: RenderableType, options: Optional[ConsoleOptions] = None) -> Iterable[Segment]:
        # rich's public hook every printed renderable passes through (nested ones too), after their layout
        return _printable_segments(super().render(renderable, options))
