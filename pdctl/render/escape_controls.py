"""Text that cannot drive the terminal: every control character but newline and tab shown as its escape.

rich drops BEL, BS, VT, FF and CR from the text of a Text and keeps ESC, so a server's error body could clear or
retitle the operator's terminal, and what it dropped was lost silently. Importing this module (the render package
does, before any printer builds a Text) has every Text escape them instead, before layout, so widths count the
escapes. --json never goes through here: it keeps the exact values."""

from __future__ import annotations

import rich.text

from pdctl.render.terminal_safe import printable


def escape_controls(text: str) -> str:
    """`text` with every control character but newline and tab escaped (`\\x1b`, `\\r`, `\\u2028`). Pure."""
    if text.isprintable():
        return text
    return "".join(ch if ch in "\n\t" or ch.isprintable() else printable(ch) for ch in text)


rich.text.strip_control_codes = escape_controls  # the name rich.text calls for each Text it builds
