"""Where a watch's timeline lines go: every sink (the --timeline writer, the change lines of a log, a test's list),
each on its own, each fallible (pdctl.checks.watch_outputs). A sink that raises fails alone: its failure, and later
its recovery, is an {"event": "output"} line to the sinks that work and a row of the ledger the exporter reads
(pdctl_output_ok); it is called again with the next batch. A sink whose reader went away for good (ReaderGone) is
called no more and the watch is told to end. Nothing a sink raises reaches the round that emitted: its hooks (the
heal) run whatever the outputs do."""

from __future__ import annotations

import threading
from typing import Callable

from pdctl.checks.watch_events import TimelineEvent, TimelineSink
from pdctl.checks.watch_outputs import OutputChanged, OutputFailed, OutputHealth, OutputLedger, ReaderGone


def sink_name(sink: TimelineSink) -> str:
    """How an output is named in its output lines and metrics: its `name`, else its type's."""
    name = getattr(sink, "name", None)
    return name if isinstance(name, str) and name else type(sink).__name__


class Outputs:
    def __init__(
        self,
        sinks: list[TimelineSink],
        deployment: str,
        lock: threading.RLock,
        wall: Callable[[], float],
        *,
        on_reader_gone: Callable[[], None],
    ):
        """`sinks` is read at each batch (a sink added later is served too); the ledger is changed under `lock`
        (the exporter reads it under the same); `on_reader_gone` is called when a sink's reader went away."""
        self.sinks = sinks
        self.ledger = OutputLedger(deployment)
        self.reader_gone = False
        self._lock, self._wall, self._on_reader_gone = lock, wall, on_reader_gone
        self._emit_lock = threading.Lock()  # sinks see whole batches, in order
        self._gone: set[int] = set()  # id() of the sinks whose reader went away
        self._lost: dict[str, int] = {}  # lines lost by a sink that keeps nothing for later (the change lines)
        for sink in sinks:  # exported from the start: pdctl_output_ok is 1 until the output fails
            self.ledger.outputs.setdefault(sink_name(sink), OutputHealth(sink_name(sink)))

    def emit(self, lines: list[TimelineEvent]) -> None:
        """`lines` to every sink; then the output lines that made, to the sinks that work (bounded: an output
        line that fails a sink in turn is said once). Raises nothing a sink raised."""
        if not lines:
            return
        with self._emit_lock:
            batch: list[TimelineEvent] = lines
            for _ in range(len(self.sinks) + 1):
                changes = [c for sink in self._sinks(working_only=batch is not lines) if (c := self._to(sink, batch))]
                if not changes:
                    return
                batch = list(changes)

    def _sinks(self, *, working_only: bool) -> list[TimelineSink]:
        out = [s for s in self.sinks if id(s) not in self._gone]
        if working_only:  # an output's line goes where it can be read: not to an output failing now
            out = [s for s in out if (h := self.ledger.outputs.get(sink_name(s))) is None or h.ok]
        return out

    def _to(self, sink: TimelineSink, lines: list[TimelineEvent]) -> OutputChanged | None:
        """One batch to one sink; the output line its failure or recovery makes (None: no change)."""
        name = sink_name(sink)
        try:
            sink(lines)
        except ReaderGone:
            self._gone.add(id(sink))
            self.reader_gone = True
            self._on_reader_gone()
            return None
        except Exception as e:  # OutputFailed, or a sink's own bug: that output fails, not the watch
            why = e.message if isinstance(e, OutputFailed) else f"{type(e).__name__}: {e}".splitlines()[0]
            if not isinstance(getattr(sink, "dropped_lines", None), int):  # it keeps nothing: the batch is lost
                self._lost[name] = self._lost.get(name, 0) + len(lines)
            with self._lock:
                return self.ledger.failed(name, why, self._wall(), dropped_lines=self._dropped(sink, name))
        with self._lock:
            return self.ledger.worked(name, self._wall(), dropped_lines=self._dropped(sink, name))

    def _dropped(self, sink: TimelineSink, name: str) -> int:
        kept = getattr(sink, "dropped_lines", None)
        return kept if isinstance(kept, int) else self._lost.get(name, 0)
