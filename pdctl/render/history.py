"""What `pdctl history` prints: the audit log, one row per record."""

from __future__ import annotations

from rich.cells import cell_len

from pdctl import render
from pdctl.render.escape_controls import Text
from pdctl.render.layout import Col, block, plain_table
from pdctl.render.terminal_safe import printable

BLOCK_COLS = (
    Col("time", head=True),
    Col("operator", head=True),
    Col("action", head=True),
    Col("seconds", head=True),
    Col("result"),
    Col("inventory"),
)

HISTORY_RESULT_MAX = 80
_HISTORY_STYLE = {
    "ok": "green",
    "failed": "red",
    "refused": "yellow",
    "unreachable": "red",
    "usage": "red",
    "interrupted": "yellow",
    "unfinished": "bold yellow",
    "taken over": "yellow",
    "unrecorded": "yellow",
}


def shorten(text: str, limit: int = HISTORY_RESULT_MAX) -> str:
    """The first sentence (or line) of `text`, control characters escaped, at most `limit` characters, `…` when
    cut. Escaped before it is measured: an ESC shows as four characters. Pure."""
    import re

    text = text.strip()
    first = re.split(r"\n|(?<=[.!?])\s", text, maxsplit=1)[0].strip()
    cut = first != text
    first = printable(first)
    if len(first) > limit:  # at a space when there is one: a role label or a path is never cut inside
        head = first[: limit - 1]
        first, cut = (head.rsplit(" ", 1)[0] if " " in head else head).rstrip(), True
    return first + ("…" if cut else "")


def fold_hard(text: str, cells: int) -> str:
    """`text` cut into lines of exactly `cells` terminal cells (the last shorter), never at its spaces: a path
    with spaces in it (`/srv/my  dir`) reads back exactly, where wrapping at spaces would hide a double space in
    the padding. Pure."""
    if cells < 1 or cell_len(text) <= cells:
        return text
    lines, line = [], ""
    for ch in text:
        if cell_len(line + ch) > cells:
            lines.append(line)
            line = ""
        line += ch
    return "\n".join(lines + [line])


def history_lines(lines: list, *, filters: list[str] | None = None, log: str = "") -> None:
    """The audit log (pdctl.audit.records lines), one table row per line (the full result is in --json)."""
    from pdctl.audit.records import CorruptLine, fold_runs, result_word

    c = render.console()
    lines = fold_runs(lines)  # a run once, by its end; a start alone is a run that never finished
    if not lines:
        if filters:
            c.print(Text("no records match " + " ".join(filters), style="dim"))
        else:
            c.print(Text("no records yet" + (f" (log: {log})" if log else ""), style="dim"))
        return
    rows: list[tuple[str, str, str | Text, Text, str, str]] = []  # time, operator, action, result, seconds, inventory
    for r in lines:
        if isinstance(r, CorruptLine):
            rows.append(
                (
                    "",
                    "",
                    Text("CORRUPT LINE", style="bold red"),
                    Text(shorten(f"{r.reason}: " + r.text.replace("\n", " ")), style="red"),  # why, then what
                    "",
                    "",
                )
            )
            continue
        word, detail = result_word(r)
        word = printable(word)  # every field is what the log holds: escaped, so it cannot drive the terminal
        cell = Text(word, style=_HISTORY_STYLE.get(word, "")) + Text(
            f": {shorten(detail, HISTORY_RESULT_MAX - len(word) - 2)}" if detail else ""
        )
        dur = r.get("duration_s")
        rows.append(
            (
                printable(r.get("time", "")),
                printable(r.get("operator", "")),
                printable(r.get("action", "")),
                cell,
                f"{dur:.1f}" if isinstance(dur, (int, float)) else "",
                printable(r.get("inventory", "")),
            )
        )
    cols = ("time", "operator", "action", "result", "seconds", "inventory")
    widths = [
        max([len(col)] + [cell_len(x.plain if isinstance(x, Text) else x) for x in column])
        for col, column in zip(cols, zip(*rows))
    ]  # in terminal cells: a CJK character takes two
    # One line per record when it fits. When the table is wider than the terminal, the result column gives way (its
    # first sentence, shortened at a space; the whole of it is in --json); the others keep their width: an
    # inventory path is an identifier. When that is not enough, one block per record, each value whole.
    spare = c.width - (3 * len(cols) + 1) - sum(widths)
    for k, floor in ((3, 24),):
        if spare >= 0:
            break
        give = min(-spare, max(0, widths[k] - floor))
        widths[k] -= give
        spare += give
    if spare < 0:
        c.print(Text("audit log", style="italic"))
        for row in rows:
            secs = (row[4] + "s") if row[4] else ""
            inv = fold_hard(row[5], c.width - len("   inventory: "))
            for part in block(BLOCK_COLS, (row[0], row[1], row[2], secs, row[3], inv), width=c.width):
                c.print(part)
        return
    t = plain_table("audit log")
    for col, w in zip(cols, widths):
        t.add_column(col, no_wrap=True, overflow="ellipsis", width=w, justify="right" if col == "seconds" else "left")
    for row in rows:
        t.add_row(*row)
    c.print(t)
