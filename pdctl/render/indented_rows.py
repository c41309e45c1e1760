"""A line of styled text as screen rows: wrapped at spaces, the rows after the first indented (so a continued row
never reads as a new one), a word longer than a row folded rather than cut. Pure."""

from __future__ import annotations

import re

from rich.cells import cell_len

from pdctl.render.escape_controls import Text

MIN_WIDTH = 20  # narrower than this, a line is not wrapped here at all (the terminal wraps it)


def row_spans(plain: str, width: int, indent: int) -> list[tuple[int, int]]:
    """Where `plain` breaks into rows of at most `width` cells, the rows after the first indented by `indent`: at
    spaces; a word longer than a row is folded (every character stays). (start, end) offsets. Pure."""
    out: list[tuple[int, int]] = []
    start, end, used = 0, -1, 0  # the row under way: where it starts, where its last word ends (-1: none yet)
    for m in re.finditer(r"\S+", plain):
        b, e = m.span()
        gap = cell_len(plain[start:b] if end < 0 else plain[end:b])
        if end >= 0 and used + gap + cell_len(plain[b:e]) > width - (indent if out else 0):
            out.append((start, end))
            start, end, used, gap = b, -1, 0, 0
        while end < 0 and gap + cell_len(plain[b:e]) > width - (indent if out else 0):  # folded
            fit, cut = width - (indent if out else 0) - gap, b
            while cut < e and cell_len(plain[b : cut + 1]) <= fit:
                cut += 1
            cut = max(cut, b + 1)
            out.append((start, cut))
            start = b = cut
            gap = 0
        used += gap + cell_len(plain[b:e])
        end = e
    out.append((start, max(end, start)))
    return out


def wrap_indented(line: Text, width: int | None, indent: int) -> list[Text]:
    """One logical line as screen rows: wrapped at spaces to `width`, the rows after the first indented. Pure."""
    if width is None or width < MIN_WIDTH or cell_len(line.plain) <= width:
        return [line]
    rows = []
    for k, (a, b) in enumerate(row_spans(line.plain, width, indent)):
        row = Text(" " * indent if k else "")
        rows.append(row.append(line[a:b]))
    return rows
