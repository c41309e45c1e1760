"""Progress events: the library reports what it is doing and waiting for; the CLI decides how to show it.

The library never prints. Long sequences call `progress.step(...)` / `progress.waiting(...)`; the default sink
drops them, the CLI's sink renders them on stderr (so `--json` stdout stays one document). Where the amount of
work is known, an event carries `done` of `total` (storm requests answered, restart steps finished, inflight
samples read), so a printer can draw a bar.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator


@dataclass
class Event:
    kind: str  # "step", "done", "failed", "waiting", "info"
    what: str
    elapsed: float = 0.0
    limit: float | None = None
    detail: str = ""
    done: int | None = None  # units of work finished (a step event: steps finished before this one)
    total: int | None = None  # units of work in all, when known


@dataclass
class Progress:
    sink: Callable[[Event], None] | None = None
    events: list[Event] = field(default_factory=list)  # kept so a failure report can list the steps done

    def emit(self, ev: Event) -> None:
        self.events.append(ev)
        if self.sink:
            self.sink(ev)

    def info(self, what: str, detail: str = "") -> None:
        self.emit(Event("info", what, detail=detail))

    def waiting(
        self,
        what: str,
        elapsed: float,
        limit: float,
        detail: str = "",
        *,
        done: int | None = None,
        total: int | None = None,
    ) -> None:
        # Waiting events are frequent: pass them to the sink but do not keep them.
        if self.sink:
            self.sink(Event("waiting", what, elapsed, limit, detail, done=done, total=total))

    @contextmanager
    def step(self, what: str, *, index: int | None = None, total: int | None = None) -> Iterator[None]:
        """One step; `index` (0-based) of `total` when it is one of a known number of steps."""
        start = time.monotonic()
        self.emit(Event("step", what, done=index, total=total))
        try:
            yield
        except BaseException as e:
            self.emit(
                Event(
                    "failed",
                    what,
                    time.monotonic() - start,
                    detail=str(e).splitlines()[0] if str(e) else type(e).__name__,
                    done=index,
                    total=total,
                )
            )
            raise
        self.emit(Event("done", what, time.monotonic() - start, done=None if index is None else index + 1, total=total))
