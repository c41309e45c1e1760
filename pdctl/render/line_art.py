"""What a dumb terminal (TERM=dumb or unknown: an editor's shell buffer, a serial console) is sent instead of line
drawing: each box-drawing or block character as one ASCII character of the same width, so a table, a box, a chart
or a progress bar keeps its layout and reads as `+--+`, `|`, `#`. Pure; applied by the console (pdctl_console.py)
after layout, so rich's boxes and pdctl's own drawings (charts, the stacked rule, bars) are all covered."""

from __future__ import annotations

import os
import unicodedata

DUMB_TERMS = ("dumb", "unknown")  # rich's own test for a terminal without capabilities


def is_dumb_term(term: str | None) -> bool:
    """Whether a TERM value names a terminal that cannot be trusted with line drawing or cursor moves."""
    return (term or "").lower() in DUMB_TERMS


def _ascii_for(name: str) -> str:
    """One ASCII character for a box-drawing or block character, from its Unicode name."""
    if "DIAGONAL" in name:
        slope = name.split("DIAGONAL ")[-1]
        return {"UPPER LEFT TO LOWER RIGHT": "\\", "UPPER RIGHT TO LOWER LEFT": "/"}.get(slope, "X")
    if name.startswith("BOX DRAWINGS"):
        across = any(w in name for w in ("HORIZONTAL", "LEFT", "RIGHT"))
        along = any(w in name for w in ("VERTICAL", "UP", "DOWN"))
        if across and not along:
            return "=" if "DOUBLE" in name else "-"
        return "|" if along and not across else "+"
    shades = {"LIGHT SHADE": ".", "MEDIUM SHADE": ":", "DARK SHADE": "#"}
    if name in shades:
        return shades[name]
    if name in ("LEFT ONE EIGHTH BLOCK", "RIGHT ONE EIGHTH BLOCK"):  # a bar's ends
        return "|"
    if name in ("LOWER ONE EIGHTH BLOCK", "LOWER ONE QUARTER BLOCK", "LOWER THREE EIGHTHS BLOCK"):
        return "_"
    return "#"


# box drawing U+2500-257F and block elements U+2580-259F
_TABLE = {cp: _ascii_for(unicodedata.name(chr(cp), "")) for cp in range(0x2500, 0x25A0)}


def ascii_line_art(text: str) -> str:
    """`text` with every box-drawing and block character as its ASCII stand-in (same width); the rest unchanged."""
    return text.translate(_TABLE)


def terminal_size(fd: int | None, width: int | None, height: int | None) -> tuple[int, int]:
    """The size to lay out for on a dumb terminal, which rich takes to be 80x25 whatever it is: the size asked for,
    else $COLUMNS / $LINES, else what the terminal on `fd` says, else 80x25."""
    cols = lines = 0
    if fd is not None:
        try:
            cols, lines = os.get_terminal_size(fd)
        except (OSError, ValueError):  # not a terminal after all
            pass

    def pick(given: int | None, env: str, size: int, default: int) -> int:
        if given:
            return given
        value = os.environ.get(env, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
        return size if size > 0 else default

    return pick(width, "COLUMNS", cols, 80), pick(height, "LINES", lines, 25)
