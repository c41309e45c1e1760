"""`pdctl watch --timeline FILE|-`: the verdict timeline as JSON lines (docs/watch.md), appended to FILE or written
to stdout, one flush per batch so a reader (`tail -f`, a log shipper) sees each change when it happens. Secret
values are masked as everywhere else."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Sequence, TextIO

from pdctl.checks.watch_events import TimelineEvent


class TimelineWriter:
    def __init__(self, target: str):
        """`target`: a file path (appended to) or "-" (stdout). Raises UsageError naming --timeline when the file
        cannot be opened."""
        from pdctl.errors import UsageError

        self._own = target != "-"
        try:
            self._out: TextIO = open(Path(target), "a", encoding="utf-8") if self._own else sys.stdout
        except OSError as e:
            raise UsageError(
                f"--timeline {target}: cannot write there: {e.strerror or e}",
                hint="choose a writable file, or - for stdout",
            ) from None

    def __call__(self, events: Sequence[TimelineEvent]) -> None:
        from pdctl.secrets import mask_text

        for event in events:  # each text value masked, so the line stays valid JSON
            masked = {k: mask_text(v) if isinstance(v, str) else v for k, v in event.to_line().items()}
            self._out.write(json.dumps(masked, default=str) + "\n")
        self._out.flush()

    def close(self) -> None:
        if self._own:
            self._out.close()
