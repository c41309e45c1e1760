"""The watch's own outputs (the --timeline file, FIFO or stdout; the change lines of a log) are fallible: a full
disk, a FIFO whose reader left, a file rotated away. An output that fails is an event, never the end of the watch:
its rounds, its exporter and its heal go on. This module holds what that takes, pure:

- `OutputFailed`, what a sink raises when a batch could not be written (`message`: one line for the operator);
- `ReaderGone`, what a sink raises when the reader of standard output went away for good (`watch ... | head -1`):
  the watch then ends as if its --for ran out, quietly, with its verdict as exit status;
- `OutputChanged`, the timeline line that says an output fails or works again ({"event": "output"});
- `OutputLedger`, each output's state (failing since when, why, how many batches failed, lines dropped), which says
  a change once, not at every batch, and which the exporter and the --json document read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pdctl.checks.watch_events import TimelineEvent


class OutputFailed(Exception):
    """A sink could not write a batch (it keeps what it could not write, within its bound, for its next one)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class ReaderGone(Exception):
    """Standard output's reader went away: nobody will read this output again."""


@dataclass(frozen=True)
class OutputChanged(TimelineEvent):
    """One of the watch's outputs fails (and why), or works again (and what was lost meanwhile)."""

    EVENT = "output"

    output: str  # "timeline FILE", "timeline stdout", "change lines"
    status: Literal["failing", "recovered"]
    observed: str


@dataclass
class OutputHealth:
    name: str
    failing_since: float | None = None  # unix time of the first failed batch of the current failure
    why: str = ""
    failures: int = 0  # batches that failed, over the whole watch
    dropped_lines: int = 0  # lines it could not keep for later (its backlog was full), over the whole watch
    dropped_before: int = 0  # dropped_lines when the current failure began

    @property
    def ok(self) -> bool:
        return self.failing_since is None


@dataclass
class OutputLedger:
    deployment: str
    outputs: dict[str, OutputHealth] = field(default_factory=dict)

    def _of(self, name: str) -> OutputHealth:
        return self.outputs.setdefault(name, OutputHealth(name))

    def failed(self, name: str, why: str, t: float, *, dropped_lines: int = 0) -> OutputChanged | None:
        """A batch to `name` failed at `t`: its line when the output was working or fails another way now, else None
        (a disk that stays full is said once)."""
        h = self._of(name)
        h.failures += 1
        if h.failing_since is None:
            h.failing_since, h.dropped_before = t, h.dropped_lines
        h.dropped_lines = max(h.dropped_lines, dropped_lines)
        if h.why == why:
            return None
        h.why = why
        return OutputChanged(t, self.deployment, name, "failing", why)

    def worked(self, name: str, t: float, *, dropped_lines: int = 0) -> OutputChanged | None:
        """A batch to `name` was written at `t`: its line when the output was failing, else None."""
        h = self._of(name)
        h.dropped_lines = max(h.dropped_lines, dropped_lines)
        if h.failing_since is None:
            return None
        lost = h.dropped_lines - h.dropped_before
        since, h.failing_since, h.why = h.failing_since, None, ""
        kept = "every line kept meanwhile was written" if not lost else f"{lost} line(s) dropped meanwhile"
        return OutputChanged(t, self.deployment, name, "recovered", f"writes again after {t - since:.0f}s; {kept}")

    def failing(self) -> list[OutputHealth]:
        return [h for h in self.outputs.values() if not h.ok]
