"""`--report FILE.svg|FILE.html`: what the screen showed (stdout and stderr lines, in the order printed, and a
--json document), saved with rich's console export for the incident write-up, self-contained.

- Stamped: its first rows say when it was written (UTC, and the local time with its offset), of which deployment,
  by whom (the operator as the audit log names them), with which pdctl, and the command line that made it (secrets
  masked): the file alone says what it is.
- What stays on a screen only: neither the live progress line (redrawn in place) nor the progress's step lines
  (`  -> final-health`, `  ok ...`, `  !! ... failed after`: what a command is doing while it runs; its outcome,
  errors included, is printed by the command itself) are recorded (pdctl.render.progress prints them past it).
- Nothing fetched: rich's SVG loads its font from a CDN; here the SVG and the HTML name local monospace fonts only,
  so the document holds no network reference of its own (the SVG's xmlns is a name, not a fetch).
- Nothing lost: the HTML wraps long lines (pre-wrap, a word longer than the window broken anywhere); the SVG is as
  wide as the console that recorded it, and a line longer than that (a command line printed whole) is folded onto
  the next rows instead of cut off at the edge."""

from __future__ import annotations

import html
import io
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import rich.text
from rich.console import CONSOLE_SVG_FORMAT, Console, ConsoleOptions
from rich.segment import Segment

from pdctl.errors import UsageError
from pdctl.render.escape_controls import Text, escape_controls
from pdctl.render.indented_rows import wrap_indented
from pdctl.render.pdctl_console import PdctlConsole
from pdctl.safe_write import READABLE, write_whole

REPORT_SUFFIXES = (".svg", ".html")
#: fonts every machine has one of: no web font, so an offline laptop shows the report as written
MONOSPACE = "'DejaVu Sans Mono', 'Liberation Mono', Menlo, Consolas, 'Courier New', monospace"


class _JournalConsole(PdctlConsole):
    """A recording console that hands each print's record to the report's journal as soon as it is printed (as
    ANSI-styled text, through rich's public export), so stdout's and stderr's lines keep the order they were
    printed in: rich records per console."""

    def __init__(self, journal: list[str], **kwargs: Any) -> None:
        super().__init__(record=True, **kwargs)
        self.journal = journal

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*objects, **kwargs)
        self.journal.append(self.export_text(clear=True, styles=True))


class _Recorder:
    def __init__(self, out: Callable[..., PdctlConsole], err: Callable[..., PdctlConsole]) -> None:
        self.journal: list[str] = []
        self.out = out(console_class=_JournalConsole, journal=self.journal)
        self.err = err(console_class=_JournalConsole, journal=self.journal)

    def segments(self) -> list[Segment]:
        """What was recorded so far, styles kept, control codes left out (the journal's ANSI read back)."""
        text = rich.text.Text.from_ansi("".join(self.journal), end="")
        return list(text.render(self.out))


_ACTIVE: _Recorder | None = None


def recording_console(stderr: bool) -> Console | None:
    """The recording console of stdout or stderr while a report is recorded, else None."""
    if _ACTIVE is None:
        return None
    return _ACTIVE.err if stderr else _ACTIVE.out


def record_text(text: str) -> None:
    """Keep `text` (already written to the screen some other way, e.g. the --json document) in the report."""
    if _ACTIVE is not None:
        _ACTIVE.journal.append(escape_controls(text) + "\n")


def start(out: Callable[..., PdctlConsole], err: Callable[..., PdctlConsole]) -> None:
    """Record everything printed through render.console() from now on (until save): `out` and `err` make the
    consoles that render.console() hands out for stdout and stderr meanwhile, given the console class to make
    and its extra arguments."""
    global _ACTIVE
    _ACTIVE = _Recorder(out, err)


@dataclass(frozen=True)
class Stamp:
    """What a report says of itself, at its top."""

    written: float  # unix time the report was written
    started: float  # unix time the command started
    deployment: str  # the inventory's name; "" when it could not be loaded
    inventory: str  # where it was read from (a path, "<embedded default>")
    operator: str  # as the audit log names them (pdctl.state.operator)
    version: str  # pdctl's
    command_line: str  # as typed, secrets masked


_LABEL = 11  # the stamp's label column


def _utc_and_local(t: float) -> str:
    utc = datetime.fromtimestamp(t, timezone.utc)
    local = datetime.fromtimestamp(t, timezone.utc).astimezone()
    offset = local.strftime("%z")
    return f"{utc:%Y-%m-%d %H:%M:%S} UTC ({local:%H:%M:%S} local, UTC{offset[:3]}:{offset[3:]})"


def stamp_rows(s: Stamp, width: int | None = None) -> list[Text]:
    """The report's first rows: when it was written; the deployment; the operator, pdctl's version and when the
    command started; the command line; each wrapped to `width` under its value. Pure."""
    ran = datetime.fromtimestamp(s.started, timezone.utc)
    deployment = s.deployment or "?"
    if s.inventory and s.inventory != s.deployment:
        deployment += f" ({s.inventory}{'' if s.deployment else ': not loaded'})"
    said = [
        ("report", f"written {_utc_and_local(s.written)}"),
        ("deployment", deployment),
        ("operator", f"{s.operator}; pdctl {s.version}; the command started {ran:%H:%M:%S} UTC"),
        ("command", s.command_line),
    ]
    rows = []
    for label, value in said:
        row = Text()
        row.append(f"{label:<{_LABEL}}", style="bold")
        rows += wrap_indented(row.append(value), width, _LABEL)
    return rows


class _Segments:
    """Recorded segments, printed again as they are."""

    def __init__(self, segments: Iterable[Segment]):
        self.segments = list(segments)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        yield from self.segments


def folded(segments: Iterable[Segment], width: int) -> list[Segment]:
    """`segments` with every line wider than `width` cells folded onto the next rows (every character kept, in
    order): the SVG export crops a line at its width. Pure."""
    out: list[Segment] = []
    for line in Segment.split_lines(segments):
        length = Segment.get_line_length(line)
        pieces = Segment.divide(line, list(range(width, length, width)) + [length]) if length > width else [line]
        for piece in pieces:
            out += [*piece, Segment.line()]
    return out


def _svg_format() -> str:
    """rich's SVG template without its web fonts (@font-face from a CDN) and its link, naming local fonts."""
    fmt = re.sub(r"\s*@font-face\s*\{\{.*?\}\}", "", CONSOLE_SVG_FORMAT, flags=re.S)
    fmt = re.sub(r"\s*<!--.*?-->", "", fmt, flags=re.S)
    fmt = re.sub(r"font-family:\s*Fira Code,\s*monospace;", f"font-family: {MONOSPACE};", fmt)
    return fmt.replace("font-family: arial;", "font-family: sans-serif;")


_HTML_FORMAT = """<!DOCTYPE html>
<html>
<head>
<meta charset="UTF-8">
<title>@TITLE@</title>
<style>
{stylesheet}
body {{
    color: {foreground};
    background-color: {background};
}}
pre {{
    font-family: @FONTS@;
    white-space: pre-wrap;
    overflow-wrap: anywhere;
}}
</style>
</head>
<body>
    <pre><code style="font-family:inherit">{code}</code></pre>
</body>
</html>
"""


def _html_format(title: str) -> str:
    said = html.escape(title).replace("{", "{{").replace("}", "}}")
    return _HTML_FORMAT.replace("@TITLE@", said).replace("@FONTS@", MONOSPACE)


def export(recorded: list[Segment], width: int, title: str, stamp: Stamp | None, *, svg: bool) -> str:
    """The report's document: the stamp's rows, then the recorded segments. Pure."""
    doc = Console(file=io.StringIO(), record=True, width=width, highlight=False)
    if stamp is not None:
        for row in stamp_rows(stamp, width):
            doc.print(row)
        doc.print(Text("─" * min(width, 80), style="dim"))
    doc.print(_Segments(folded(recorded, width) if svg else recorded), crop=False, end="")
    if svg:
        return doc.export_svg(title=title, code_format=_svg_format())
    return doc.export_html(code_format=_html_format(title))


def save(path: Path, title: str, stamp: Stamp | None = None) -> None:
    """Stop recording and write what was recorded to `path`, under `stamp`'s rows: SVG or HTML by its suffix,
    replacing the file whole (pdctl.safe_write.write_whole: a new file, 0644 less the umask, renamed over it;
    nothing written through a link). Raises UsageError naming `--report` and the path when it is refused or cannot
    be written."""
    global _ACTIVE
    rec, _ACTIVE = _ACTIVE, None
    if rec is None:
        return
    doc = export(rec.segments(), rec.out.width, title, stamp, svg=path.suffix.lower() == ".svg")
    write_whole(path, doc, UsageError, "--report", mode=READABLE)
