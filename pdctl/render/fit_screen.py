"""A failing read command on one screen: the verdict and the next command first, what failed in the middle, and a
closing line that says both again, so they are in view after any scroll. The middle is built in parts of
falling importance; parts that do not fit the rows left are dropped whole and said to be ("-v: ..."), never cut
inside. Pure but for `drawn` and `print_rows` (the console)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


#: the screen a 3 a.m. reader has: tmux or a laptop terminal, 80 columns by 24 rows
SCREEN_ROWS = 24
#: rows the shell's next prompt takes below the output
PROMPT_ROWS = 1


@dataclass
class Row:
    text: str
    style: str = ""
    styled: Any = None  # a row drawn with several styles (a table's row: rich Text), printed instead of `text`


@dataclass
class Part:
    """Rows that stay or go together. `keep`: never dropped (the verdict, the next command, one line per cause)."""

    rows: list[Row]
    keep: bool = False
    dropped_note: str = ""  # what the reader loses when the part is dropped, e.g. "why of 2 checks"
    order: int = 0  # where it prints; parts are dropped from the least important (`rank` highest) first
    rank: int = 0


_GLUE = "\u00a0"  # a space the wrapping does not break at; printed as a space
_BEFORE_OPTION = "\u2007"  # the space before an --option: not broken at unless its glued run is longer than a row


def glued(text: str) -> str:
    """`text` kept on one line when wrapped (unless longer than the line). Pure."""
    return text.replace(" ", _GLUE)


def _words(text: str) -> list[tuple[str, str]]:
    """`text` as (the spaces before it, word) at the spaces a row may break at: a `backquoted` command, an
    `--option` with what precedes it and a pair's name ("prefill[0] -> decode[1]") are glued into one word, as is
    what `glued` marked. Control characters (a server's CR, ESC) are escaped first, so the wrapping neither turns
    one into a space nor counts it as no width. Pure."""
    import re

    from pdctl.render.escape_controls import escape_controls

    # the glue (itself not printable) stays glue; a server's own no-break space prints as the space it looks like
    text = _GLUE.join(escape_controls(part) for part in text.replace("\n", " ").split(_GLUE))
    parts = text.split("`")
    text = "`".join(p.replace(" ", _GLUE) if k % 2 else p for k, p in enumerate(parts))
    text = text.replace(" -> ", f"{_GLUE}->{_GLUE}")  # a pair's name stays whole
    text = re.sub(r"(--[\w-]+) (?=[^-\s])", "\\1" + _GLUE, text)  # an option and its value
    text = re.sub(r"(?<=\S) --", _BEFORE_OPTION + "--", text)  # `restart --rolling` too, but it gives way first
    return re.findall(r"( *)([^ ]+)", text)


def _wrap(text: str, first: int, rest: int) -> list[str]:
    """`text` in rows, the first at most `first` characters, the others `rest` (each at least 20), broken at
    spaces (runs of spaces kept inside a row: "FAIL  /health"). A glued run longer than a row breaks at its own
    spaces; a word longer than a row (a JSON body, a URL) is folded rather than left to overflow: every character
    stays on screen, none is added. Pure."""
    rows: list[str] = []
    row = ""

    def room() -> int:
        return max(20, rest if rows else first)

    def put(gap: str, word: str) -> None:
        nonlocal row
        while word:
            sep = gap if row else ""
            if len(row) + len(sep) + len(word) <= room():
                row += sep + word
                return
            if row or (not rows and len(word) <= max(20, rest)):  # to a fresh row (one it fits whole, if any)
                rows.append(row)
                row = ""
                continue
            cut = room()  # longer than any row: folded
            rows.append(word[:cut])
            word = word[cut:]

    for gap, word in _words(text):
        if len(word) <= max(20, rest):
            put(gap, word)
            continue
        for k, run in enumerate(word.split(_BEFORE_OPTION)):  # too long for a row: it breaks before an option,
            if len(run) <= max(20, rest):  # then, if need be, at its other glued spaces
                put(gap if k == 0 else " ", run)
                continue
            for i, piece in enumerate(run.split(_GLUE)):
                put(gap if k == 0 == i else " ", piece)
    return rows + [row] if row or not rows else rows


def _row(text: str, style: str) -> Row:
    return Row(text.replace(_GLUE, " ").replace(_BEFORE_OPTION, " "), style)


def wrapped(text: str, width: int, *, indent: int = 2, style: str = "", first: str = "") -> list[Row]:
    """`first` + `text` wrapped to `width`, the lines after the first indented by `indent`; never inside a
    `command`. Pure."""
    lines = _wrap(text, width - 1 - len(first), width - 1 - indent)
    return [_row((first if k == 0 else " " * indent) + line, style) for k, line in enumerate(lines)]


def labelled(label: str, text: str, width: int, *, style: str = "") -> list[Row]:
    """'  observed: text' with the text wrapped under itself. Pure."""
    head = f"  {label:<11}"
    lines = _wrap(text, width - 1 - len(head), width - 1 - len(head))
    return [_row((head if k == 0 else " " * len(head)) + line, style) for k, line in enumerate(lines)]


def closing_rows(verdict: str, next_step: str, width: int, style: str) -> list[Row]:
    """`closing` as rows of `width`, the command kept on one row when it fits one. Pure."""
    command = next_step.split(" (", 1)[0]
    whole = glued(command) if len(command) < width - 2 else command  # longer: it breaks before an option
    return wrapped(f"{verdict} -- next: {whole}" if command else verdict, width, style=style)


def closing(verdict: str, next_step: str) -> str:
    """The last line: the verdict word(s) and the next command, without its explanation ("pdctl triage" of
    "pdctl triage (which failure, ...)"). Pure."""
    command = next_step.split(" (", 1)[0]
    return f"{verdict} -- next: {command}" if command else verdict


@dataclass
class Screen:
    width: int
    head: list[Row] = field(default_factory=list)  # the verdict and the next command
    parts: list[Part] = field(default_factory=list)
    tail: list[Row] = field(default_factory=list)  # the closing line

    def add(self, rows: list[Row], *, keep: bool = False, rank: int = 0, note: str = "") -> None:
        """A part printed after those added before it."""
        self.parts.append(Part(rows, keep=keep, dropped_note=note, order=len(self.parts), rank=rank))

    def _note(self, dropped: list[Part]) -> list[Row]:
        notes = list(dict.fromkeys(p.dropped_note for p in dropped if p.dropped_note))
        if not notes:
            return []
        return wrapped(", ".join(notes), self.width, style="dim", first="not shown to fit the screen (-v): ")

    def fit(self, rows: int = SCREEN_ROWS - PROMPT_ROWS) -> list[Row]:
        """Every row, dropping the least important droppable parts (highest `rank`, the later first) until the
        whole, with the note naming what was dropped, fits `rows`. What must stay stays even past `rows`. Pure."""
        kept = list(self.parts)
        dropped: list[Part] = []

        def total() -> int:
            return len(self.head) + sum(len(p.rows) for p in kept) + len(self._note(dropped)) + len(self.tail)

        for p in sorted((p for p in self.parts if not p.keep), key=lambda p: (-p.rank, -p.order)):
            if total() <= rows:
                break
            kept.remove(p)
            dropped.append(p)
        body = [r for p in kept for r in p.rows]
        return self.head + body + self._note(dropped) + self.tail


def drawn(renderable: Any, width: int) -> list[Row]:
    """A rich renderable (a table) as the rows it takes at `width`, each keeping its styles."""
    from pdctl import render
    from pdctl.render.escape_controls import Text

    c = render.console()
    out = []
    for segments in c.render_lines(renderable, c.options.update_width(width), pad=False):
        line = Text()
        for seg in segments:
            line.append(seg.text, seg.style)
        line.rstrip()
        out.append(Row(line.plain, styled=line))
    return out


def print_rows(rows: list[Row]) -> None:
    from pdctl import render
    from pdctl.render.escape_controls import Text

    c = render.console()
    for r in rows:
        c.print(r.styled if r.styled is not None else Text(r.text, style=r.style), soft_wrap=True)
