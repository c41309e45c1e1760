"""A failing read command on one screen: the verdict and the next command first, what failed in the middle, and a
closing line that says both again, so they are in view after any scroll. The middle is built in parts of
falling importance; parts that do not fit the rows left are dropped whole and said to be ("-v: ..."), never cut
inside. Pure but for `print_rows`."""

from __future__ import annotations

from dataclasses import dataclass, field

from pdctl.render.layout import wrap_keeping_commands

#: the screen a 3 a.m. reader has: tmux or a laptop terminal, 80 columns by 24 rows
SCREEN_ROWS = 24
#: rows the shell's next prompt takes below the output
PROMPT_ROWS = 1


@dataclass
class Row:
    text: str
    style: str = ""


@dataclass
class Part:
    """Rows that stay or go together. `keep`: never dropped (the verdict, the next command, one line per cause)."""

    rows: list[Row]
    keep: bool = False
    dropped_note: str = ""  # what the reader loses when the part is dropped, e.g. "why of 2 checks"
    order: int = 0  # where it prints; parts are dropped from the least important (`rank` highest) first
    rank: int = 0


_GLUE = "\u00a0"  # a space the wrapping does not break at; printed as a space


def glued(text: str) -> str:
    """`text` kept on one line when wrapped (unless longer than the line). Pure."""
    return text.replace(" ", _GLUE)


def _wrap(text: str, width: int) -> list[str]:
    """Wrapped at spaces, never inside a `command`; a word longer than the line (a JSON body, a URL) is folded
    rather than left to overflow: every character stays on screen. A control character (a server's CR, ESC) is
    escaped first, so the wrapping neither turns it into a space nor counts it as no width. Pure."""
    import textwrap

    from pdctl.render.escape_controls import escape_controls

    out = []
    # the glue (itself not printable) stays glue; a server's own no-break space prints as the space it looks like
    text = _GLUE.join(escape_controls(part) for part in text.replace("\n", " ").split(_GLUE))
    for line in wrap_keeping_commands(text, max(20, width), glue_options=True):
        if len(line) > width:  # a glued run longer than the line breaks after all
            out += textwrap.wrap(line.replace(_GLUE, " "), max(20, width), break_on_hyphens=False)
        else:
            out.append(line)
    return out or [""]


def _row(text: str, style: str) -> Row:
    return Row(text.replace(_GLUE, " "), style)


def wrapped(text: str, width: int, *, indent: int = 2, style: str = "", first: str = "") -> list[Row]:
    """`first` + `text` wrapped to `width`, the lines after the first indented by `indent`; never inside a
    `command`. Pure."""
    lines = _wrap(text, width - 1 - len(first))
    rest = " ".join(lines[1:])
    out = [_row(first + lines[0], style)]
    if rest:
        out += [_row(" " * indent + chunk, style) for chunk in _wrap(rest, width - 1 - indent)]
    return out


def labelled(label: str, text: str, width: int, *, style: str = "") -> list[Row]:
    """'  observed: text' with the text wrapped under itself. Pure."""
    head = f"  {label:<11}"
    lines = _wrap(text, width - 1 - len(head))
    return [_row((head if k == 0 else " " * len(head)) + line, style) for k, line in enumerate(lines)]


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


def print_rows(rows: list[Row]) -> None:
    from pdctl import render
    from pdctl.render.escape_controls import Text

    c = render.console()
    for r in rows:
        c.print(Text(r.text, style=r.style), soft_wrap=True)
