"""`--report FILE.svg|FILE.html`: what the screen showed (stdout and stderr lines, in the order printed, and a
--json document), saved with rich's console export for the incident write-up. The live progress line is not
kept: it is redrawn in place, never part of what stays on the screen."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from pdctl.errors import UsageError
from pdctl.render.escape_controls import Text
from pdctl.safe_write import READABLE, write_whole

REPORT_SUFFIXES = (".svg", ".html")


class _Recorder:
    def __init__(self, out: Console, err: Console) -> None:
        self.out, self.err = out, err
        self.copy = Console(file=io.StringIO(), record=True, width=out.width, highlight=False)  # records only
        # one record buffer for the three consoles, so the report keeps the order lines were printed in
        # (rich records per console; sharing its buffer list is the only way to interleave two streams)
        for c in (err, self.copy):
            c._record_buffer = out._record_buffer
            c._record_buffer_lock = out._record_buffer_lock


_ACTIVE: _Recorder | None = None


def recording_console(stderr: bool) -> Console | None:
    """The recording console of stdout or stderr while a report is recorded, else None."""
    if _ACTIVE is None:
        return None
    return _ACTIVE.err if stderr else _ACTIVE.out


def record_text(text: str) -> None:
    """Keep `text` (already written to the screen some other way, e.g. the --json document) in the report."""
    if _ACTIVE is not None:
        _ACTIVE.copy.print(Text(text))


def start(out: Console, err: Console) -> None:
    """Record everything printed through render.console() from now on (until save): `out` and `err` are the
    recording consoles (record=True) that render.console() hands out for stdout and stderr meanwhile."""
    global _ACTIVE
    _ACTIVE = _Recorder(out, err)


def save(path: Path, title: str) -> None:
    """Stop recording and write what was recorded to `path`: SVG or HTML by its suffix, replacing the file whole
    (pdctl.safe_write.write_whole: a new file, 0644 less the umask, renamed over it; nothing written through a
    link). Raises UsageError naming `--report` and the path when it is refused or cannot be written."""
    global _ACTIVE
    rec, _ACTIVE = _ACTIVE, None
    if rec is None:
        return
    if path.suffix.lower() == ".svg":
        doc = rec.out.export_svg(title=title)
    else:
        doc = rec.out.export_html()
    write_whole(path, doc, UsageError, "--report", mode=READABLE)
