"""Text that cannot drive the terminal: every control character but newline and tab shown as its escape.

rich drops BEL, BS, VT, FF and CR from the text of a Text and keeps ESC, so a server's error body could clear or
retitle the operator's terminal, and what it dropped was lost silently. pdctl's `Text` (every printer in
pdctl/render builds this one, not rich's) escapes them instead, before layout, so widths count the escapes; strings
handed straight to the console go through PdctlConsole.render_str, which escapes them the same way. --json never
goes through here: it keeps the exact values."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Optional, Tuple, Union

import rich.text
from rich.style import Style, StyleType
from rich.text import Span

if TYPE_CHECKING:
    from rich.console import JustifyMethod, OverflowMethod
    from rich.emoji import EmojiVariant

from pdctl.render.terminal_safe import printable


def escape_controls(text: str) -> str:
    """`text` with every control character but newline and tab escaped (`\\x1b`, `\\r`, `\\u2028`). Pure."""
    if text.isprintable():
        return text
    return "".join(ch if ch in "\n\t" or ch.isprintable() else printable(ch) for ch in text)


class Text(rich.text.Text):
    """rich's Text, except that every str it takes (built, appended, tokens, markup) has its control characters
    escaped first, and what is made from it by `copy`, `+` and `join` stays pdctl's Text. Not covered: setting
    `plain`, and the lines `split`/`divide`/`wrap` return (rich's own Text, holding only this Text's already escaped
    text); pdctl appends no str to those."""

    def __init__(
        self,
        text: str = "",
        style: Union[str, Style] = "",
        *,
        justify: Optional[JustifyMethod] = None,
        overflow: Optional[OverflowMethod] = None,
        no_wrap: Optional[bool] = None,
        end: str = "\n",
        tab_size: Optional[int] = None,
        spans: Optional[list[Span]] = None,
    ) -> None:
        super().__init__(
            escape_controls(text),
            style,
            justify=justify,
            overflow=overflow,
            no_wrap=no_wrap,
            end=end,
            tab_size=tab_size,
            spans=spans,
        )

    def __add__(self, other: Any) -> Text:
        if isinstance(other, (str, rich.text.Text)):
            return self.copy().append(other)
        return NotImplemented

    def join(self, lines: Iterable[rich.text.Text]) -> Text:
        joined = self.blank_copy()
        for k, line in enumerate(lines):
            if k:
                joined.append(self)
            joined.append(line)
        return joined

    def append(self, text: Union[rich.text.Text, str], style: Optional[Union[str, Style]] = None) -> Text:
        super().append(escape_controls(text) if isinstance(text, str) else text, style)
        return self

    def append_tokens(self, tokens: Iterable[Tuple[str, Optional[StyleType]]]) -> Text:
        super().append_tokens((escape_controls(content), style) for content, style in tokens)
        return self

    def blank_copy(self, plain: str = "") -> Text:
        return Text(
            plain,
            style=self.style,
            justify=self.justify,
            overflow=self.overflow,
            no_wrap=self.no_wrap,
            end=self.end,
            tab_size=self.tab_size,
        )

    def copy(self) -> Text:
        return Text.of(self)

    @classmethod
    def of(cls, source: rich.text.Text) -> Text:
        """pdctl's Text with the text, styles and spans of `source` (one of rich's own making: a markup render)."""
        duplicate = Text(
            source.plain,
            style=source.style,
            justify=source.justify,
            overflow=source.overflow,
            no_wrap=source.no_wrap,
            end=source.end,
            tab_size=source.tab_size,
        )
        if len(duplicate) == len(source):  # else rich had kept an ESC, now escaped: its spans no longer line up
            duplicate.spans = source.spans
        return duplicate

    @classmethod
    def from_markup(
        cls,
        text: str,
        *,
        style: Union[str, Style] = "",
        emoji: bool = True,
        emoji_variant: Optional[EmojiVariant] = None,
        justify: Optional[JustifyMethod] = None,
        overflow: Optional[OverflowMethod] = None,
        end: str = "\n",
    ) -> rich.text.Text:
        # escaped before the markup is read: an escape (`\x1b`, `\r`) ends in a letter or digit, never a `\` that
        # would escape a following `[`
        return super().from_markup(
            escape_controls(text),
            style=style,
            emoji=emoji,
            emoji_variant=emoji_variant,
            justify=justify,
            overflow=overflow,
            end=end,
        )
