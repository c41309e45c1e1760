"""Tables that never drop a column and never cut an identifier: a rich table when it fits the console, else one
block per row (or, for one row per instance, `stacked`: the head cells on one aligned line, the rest indented under
it). Identifier columns (role labels, ports, metric names, flags) keep their whole width; the other columns wrap
inside themselves. A cell may be a list of items (a role's checks): joined with "; " in a table, packed whole
under its row when stacked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Union

import rich.text
from rich import box
from rich.cells import cell_len  # terminal cells, not characters: a CJK character takes two
from rich.console import Group, RenderableType
from rich.table import Table

from pdctl.render.escape_controls import Text

Cell = Union[str, rich.text.Text, list]  # a list: items of one cell (each a str or Text)
WRAP_MIN = 10  # the narrowest a wrapping column may get before the table gives way to blocks
WORD_MAX = 40  # a wrapping column is at least as wide as its longest word up to this (URLs, metric names)


@dataclass(frozen=True)
class Col:
    header: str
    ident: bool = False  # never wrapped or cut: the column is as wide as its longest cell
    right: bool = False  # right-justified (numbers)
    head: bool = False  # in block layout, on the row's first line (identifiers and the status)
    whole_words: bool = False  # wraps, but never inside a word: a sentence naming role labels (a step)


def plain(cell: Cell) -> str:
    if isinstance(cell, list):
        return "; ".join(plain(c) for c in cell)
    return cell.plain if isinstance(cell, rich.text.Text) else str(cell)


def as_text(cell: Cell) -> Text:
    if isinstance(cell, list):
        return Text("; ").join(as_text(c) for c in cell)
    return Text.of(cell) if isinstance(cell, rich.text.Text) else Text(str(cell))


def _longest_word(s: str) -> int:
    return max((cell_len(w) for w in s.split()), default=0)


def min_widths(cols: Sequence[Col], rows: Sequence[Sequence[Cell]]) -> list[int]:
    """The width below which each column would cut something: an identifier column its longest cell; a wrapping
    column its longest word (up to WORD_MAX) and at least WRAP_MIN; any column its header's longest word. Pure."""
    out = []
    for k, col in enumerate(cols):
        cells = [plain(r[k]) for r in rows]
        w = _longest_word(col.header)
        if col.ident:  # its header too: the column is never narrower than what col_widths gives it
            w = max([cell_len(col.header)] + [cell_len(c) for c in cells])
        else:
            cap = 10**6 if col.whole_words else WORD_MAX
            w = max(
                [w, min(WRAP_MIN, max((cell_len(c) for c in cells), default=0))]
                + [min(cap, _longest_word(c)) for c in cells]
            )
        out.append(w)
    return out


GAP = 2  # spaces between columns: tables have no borders, so a row of six columns fits in 80


def _chrome(cols: Sequence[Col]) -> int:
    return GAP * max(0, len(cols) - 1)


def fits(width: int, cols: Sequence[Col], rows: Sequence[Sequence[Cell]]) -> bool:
    """Whether a table of these columns fits `width` without cutting anything. Pure."""
    return sum(min_widths(cols, rows)) + _chrome(cols) <= width


def _table_lines(cols: Sequence[Col], rows: Sequence[Sequence[Cell]], width: int) -> int:
    """About how many lines a table of these rows takes at `width` (its wrapped cells counted). Pure."""
    widths = col_widths(cols, rows, width)
    return 2 + sum(max(-(-cell_len(plain(r[k])) // max(1, w)) or 1 for k, w in enumerate(widths)) for r in rows)


def _stacked_lines(cols: Sequence[Col], rows: Sequence[Sequence[Cell]], width: int) -> int:
    """About how many lines `stacked` takes for these rows at `width`. Pure."""
    rest = [k for k, c in enumerate(cols) if not c.head]
    return 2 + sum(1 + sum(-(-cell_len(plain(r[k])) // max(1, width - INDENT)) for k in rest) for r in rows)


def col_widths(cols: Sequence[Col], rows: Sequence[Sequence[Cell]], width: int) -> list[int]:
    """Each column's width in a table `width` wide: identifier columns their whole cell; the wrapping columns
    share the rest, each from its minimum towards its natural width (longest cell) in proportion. Pure."""
    mins = min_widths(cols, rows)
    natural = [max([cell_len(c.header)] + [cell_len(plain(r[k])) for r in rows]) for k, c in enumerate(cols)]
    widths = [max(m, n) if c.ident else m for c, m, n in zip(cols, mins, natural)]
    spare = width - _chrome(cols) - sum(widths)
    want = {k: natural[k] - widths[k] for k, c in enumerate(cols) if not c.ident and natural[k] > widths[k]}
    total = sum(want.values())
    for k, w in want.items():
        widths[k] += w if total <= spare else spare * w // total
    return widths


def plain_table(title: str) -> Table:
    """The one table style: a rule under the header, no borders, two spaces between columns."""
    return Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, GAP // 2),
        collapse_padding=True,
    )


def table(title: str, cols: Sequence[Col], rows: Sequence[Sequence[Cell]], width: int = 10**6) -> Table:
    t = plain_table(title)
    for col, w in zip(cols, col_widths(cols, rows, width)):
        t.add_column(col.header, justify="right" if col.right else "left", width=w, no_wrap=col.ident, overflow="fold")
    for r in rows:
        t.add_row(*(as_text(c) if isinstance(c, list) else c for c in r))
    return t


def pack(cells: Sequence[Cell], width: int, sep: str = "  ") -> list[Text]:
    """Cells on as few lines as fit `width`, a line breaking only between cells (an identifier with a space in it,
    `restart --role decode`, stays whole). Pure."""
    out: list[Text] = []
    for c in cells:
        t = as_text(c)
        if out and out[-1].cell_len + cell_len(sep) + t.cell_len <= width:
            out[-1] = out[-1] + Text(sep) + t
        else:
            out.append(t.copy())
    return out


def block(
    cols: Sequence[Col], row: Sequence[Cell], *, labels: dict[str, str] | None = None, width: int = 10**6
) -> list[RenderableType]:
    """One row as a block: its head cells on the first line(s), then one `label: value` line per other non-empty
    cell, the value wrapping under itself. Pure."""
    labels = labels or {}
    heads = pack([c for col, c in zip(cols, row) if col.head and plain(c)], width)
    rest = [
        (labels.get(col.header, col.header) + ":", as_text(c) if isinstance(c, list) else c)
        for col, c in zip(cols, row)
        if not col.head and plain(c)
    ]
    out: list[RenderableType] = list(heads)
    if rest:
        g = Table.grid(padding=(0, 1))
        g.add_column(no_wrap=True)
        g.add_column(overflow="fold")
        for label, c in rest:
            g.add_row(Text("   " + label, style="dim"), c)
        out.append(g)
    return out


def blocks(
    title: str,
    cols: Sequence[Col],
    rows: Sequence[Sequence[Cell]],
    *,
    labels: dict[str, str] | None = None,
    width: int = 10**6,
) -> Group:
    parts: list[RenderableType] = [Text(title, style="italic")] if title else []
    for r in rows:
        parts.extend(block(cols, r, labels=labels, width=width))
    return Group(*parts)


def inline(title: str, cols: Sequence[Col], rows: Sequence[Sequence[Cell]], width: int = 10**6) -> Group:
    """One line per row, `header=value` pairs (spaces in a header become `_`, so a pair never splits), wrapping
    between pairs: for numeric series too wide for a table. Pure."""
    parts: list[RenderableType] = [Text(title, style="italic")] if title else []
    for r in rows:
        pairs = [c if col.head else Text(f"{col.header.replace(' ', '_')}=") + c for col, c in zip(cols, r) if plain(c)]
        parts.extend(pack(pairs, width))
    return Group(*parts)


INDENT = 4  # a stacked row's other cells, under its head line
_KEEP = "\x00"  # stands for a space inside a `quoted command` while wrapping, so the command stays on one line


def wrap_keeping_commands(text: str, width: int, *, glue_options: bool = False) -> list[str]:
    """`text` wrapped at spaces to `width`, never inside a `backquoted` command (`pdctl restart --pair` stays
    whole) nor inside a word; with `glue_options`, never before an `--option` either (an unquoted `restart
    --rolling` stays whole). Pure."""
    import textwrap

    parts = text.split("`")
    joined = "`".join(p.replace(" ", _KEEP) if i % 2 else p for i, p in enumerate(parts))
    if glue_options:
        joined = joined.replace(" --", f"{_KEEP}--")
    lines = textwrap.wrap(joined, max(1, width), break_long_words=False, break_on_hyphens=False) or [""]
    return [line.replace(_KEEP, " ") for line in lines]


def _style_of(t: Text) -> str:
    """The style of a one-item line (its only span's), so a failed check keeps its colour when re-wrapped."""
    return str(t.spans[0].style) if len(t.spans) == 1 else ""


def _pad(cell: Cell, w: int, right: bool) -> Text:
    t = as_text(cell)
    pad = Text(" " * max(0, w - t.cell_len))
    return pad + t if right else t + pad


def stacked(title: str, cols: Sequence[Col], rows: Sequence[Sequence[Cell]], width: int = 10**6) -> RenderableType:
    """One row per instance in a few lines: the head cells whole on one line, aligned across rows under a header;
    the other non-empty cells indented under it, wrapping between items (an item wraps at spaces only when it alone
    is wider than the line). Blocks when the head cells alone do not fit `width`. Pure."""
    heads = [k for k, c in enumerate(cols) if c.head]
    widths = {k: max([cell_len(cols[k].header)] + [cell_len(plain(r[k])) for r in rows]) for k in heads}
    used = sum(widths.values()) + GAP * max(0, len(heads) - 1)
    if used > width:
        return blocks(title, cols, rows, width=width)
    gap = Text(" " * GAP)
    parts: list[RenderableType] = [Text(title, style="italic")] if title else []
    parts.append(gap.join(_pad(Text(cols[k].header, style="bold"), widths[k], cols[k].right) for k in heads))
    parts.append(Text("─" * used))
    for r in rows:
        parts.append(gap.join(_pad(r[k], widths[k], cols[k].right) for k in heads))
        lines: list[Text] = []
        loose = [cell for k, c in enumerate(cols) if not c.head and not isinstance(cell := r[k], list) and plain(cell)]
        lines += pack(loose, width - INDENT) if loose else []
        for k, c in enumerate(cols):
            if not c.head and isinstance(cell := r[k], list):
                items = [as_text(x) for x in cell]
                items = [x + Text(";") for x in items[:-1]] + items[-1:]
                lines += pack(items, width - INDENT, sep=" ")
        avail = width - INDENT
        lines = [
            x
            for line in lines
            for x in (
                [line]
                if line.cell_len <= avail
                # keeps its styles
                else [Text(w, style=line.style or _style_of(line)) for w in wrap_keeping_commands(line.plain, avail)]
            )
        ]
        if lines:
            g = Table.grid()
            g.add_column(width=INDENT, no_wrap=True)
            g.add_column(overflow="fold")
            for line in lines:
                g.add_row("", line)
            parts.append(g)
    return Group(*parts)


def grid(
    title: str,
    cols: Sequence[Col],
    rows: Sequence[Sequence[Cell]],
    width: int,
    *,
    narrow: str = "blocks",
    labels: dict[str, str] | None = None,
) -> RenderableType:
    """A table when it fits `width`, else blocks (`inline` lines for a numeric series, `stacked` lines for one row
    per instance: then a table only when it takes no more lines than stacked rows would).
    Pure."""
    if fits(width, cols, rows) and (
        narrow != "stacked" or _table_lines(cols, rows, width) <= _stacked_lines(cols, rows, width)
    ):
        # the title on its own line: a table narrower than its title would wrap it
        return (
            Group(Text(title, style="italic"), table("", cols, rows, width)) if title else table("", cols, rows, width)
        )
    if narrow == "inline":
        return inline(title, cols, rows, width)
    if narrow == "stacked":
        return stacked(title, cols, rows, width)
    return blocks(title, cols, rows, labels=labels, width=width)
