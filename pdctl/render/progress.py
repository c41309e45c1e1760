"""ProgressPrinter: the progress sink of every command (pdctl.progress events) on stderr, never in a --report.

In a terminal: one live line redrawn in place (`\\r` + clear-line: what it waits for, a bar and done/total when
the amount of work is known, elapsed/limit, the step count) and one kept line per finished step. Piped: plain
lines, a waiting line at most every PLAIN_EVERY_S. Any other output clears the live line first: `render.console()`
and `render.emit_json()` call `clear_live()`, so a report, an error or a JSON document never lands on a
half-drawn line.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Callable, TextIO

from pdctl.progress import Event
from pdctl.render.escape_controls import Text
from pdctl.render.pdctl_console import PdctlConsole

if TYPE_CHECKING:
    from rich.console import Console

PLAIN_EVERY_S = 5.0  # piped: at most one waiting line this often (a log, not a screen)
CLEAR_LINE = "\r\x1b[2K"
_SHOWN: list["ProgressPrinter"] = []  # printers whose live line is on the screen now
_LOCK = threading.RLock()


def clear_live() -> None:
    """Erase every live progress line now on screen (before any other line is printed). Safe to call anytime."""
    with _LOCK:
        for p in list(_SHOWN):
            p.clear()


def is_live(stream: TextIO) -> bool:
    """Whether progress on `stream` can be a live line: a terminal that understands `\\r` and clear-line."""
    try:
        return bool(stream.isatty()) and os.environ.get("TERM", "") != "dumb"
    except (AttributeError, ValueError):  # a closed or odd stream
        return False


def _columns(stream: TextIO) -> int:
    try:
        cols = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):  # a fake terminal in a test
        cols = 0
    if cols > 0:
        return cols
    env = os.environ.get("COLUMNS", "")  # a pty whose size was never set says 0 columns
    return int(env) if env.isdigit() and int(env) > 0 else 80


def _stderr_console(console: PdctlConsole | Console) -> PdctlConsole | Console:
    """`console` (stderr's), or while a --report is recorded one of the same width that it does not record: the
    step lines are progress, what a command does while it runs, not what it found (pdctl.render.report)."""
    from pdctl.render import report

    if console is not report.recording_console(True):
        return console
    return PdctlConsole(stderr=True, width=console.width, highlight=False, soft_wrap=False)


def bar(done: int, total: int, width: int, *, unicode: bool = True) -> str:
    """`▕████░░░░▏` with done/total of `width` cells filled (clamped to 0..total)."""
    frac = 0.0 if total <= 0 else min(1.0, max(0.0, done / total))
    full = int(round(frac * width))
    if unicode:
        return "▕" + "█" * full + "░" * (width - full) + "▏"
    return "[" + "#" * full + "-" * (width - full) + "]"


class ProgressPrinter:
    """A progress sink on stderr (or `stream`): a live line in a terminal, throttled plain lines elsewhere.

    `live` overrides the terminal test, `clock` the time source of the plain-line throttle and of a step's
    elapsed time, `width` the terminal's columns (tests)."""

    def __init__(
        self,
        quiet: bool = False,
        *,
        stream: TextIO | None = None,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        every_s: float = PLAIN_EVERY_S,
        width: int | None = None,
        reported: frozenset[str] = frozenset(),
    ):
        from pdctl import render

        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.live = is_live(self.stream) if live is None else live
        self.clock = clock
        self.every_s = every_s
        self.width = width
        # steps whose outcome the command's own report states next (final-health's verdict): on a terminal their
        # "ok"/"!!" line would only push that verdict off the first row
        self.reported = reported
        self.c = (
            _stderr_console(render.console(stderr=True))
            if stream is None
            else PdctlConsole(file=stream, width=width, highlight=False, soft_wrap=False)
        )
        self.unicode = "utf" in (getattr(self.stream, "encoding", None) or "").lower()
        self._steps: list[tuple[Event, float]] = []  # open steps, innermost last, with their start time
        self._count = 0  # steps started so far
        self._wait: Event | None = None  # the latest waiting event of the innermost step
        self._last_plain = float("-inf")
        self._drawn = ""

    # -- the sink ---------------------------------------------------------------------------------------------
    def __call__(self, ev: Event) -> None:
        if self.quiet:
            return
        with _LOCK:
            if ev.kind == "step":
                self._count += 1
                self._steps.append((ev, self.clock()))
                self._wait = None
                if not self.live:
                    self._line(Text("  -> ", style="cyan") + Text(self._tag(ev) + ev.what))
            elif ev.kind in ("done", "failed"):
                opened = self._close_step(ev.what)
                tag = self._tag(opened) if opened else ""
                if self.live and ev.what in self.reported:
                    self.clear()
                elif ev.kind == "done":
                    self._line(Text("  ok ", style="green") + Text(f"{tag}{ev.what} ({ev.elapsed:.1f}s)"))
                else:
                    self._line(
                        Text("  !! ", style="bold red")
                        + Text(f"{tag}{ev.what} failed after {ev.elapsed:.1f}s: {ev.detail}")
                    )
            elif ev.kind == "waiting":
                self._wait = ev
                if not self.live:
                    now = self.clock()
                    if now - self._last_plain >= self.every_s:
                        self._last_plain = now
                        self._line(Text("     " + self._plain_wait(ev), style="dim"))
            elif ev.kind == "info":
                self._line(Text(f"     {ev.what}" + (f": {ev.detail}" if ev.detail else ""), style="dim"))
            if self.live:
                self._draw()

    def close(self) -> None:
        """Erase the live line and forget open steps (the command is done with progress)."""
        with _LOCK:
            self.clear()
            self._steps.clear()
            self._wait = None

    def clear(self) -> None:
        """Erase the live line if it is shown; the next event draws it again."""
        with _LOCK:
            if self._drawn:
                self.stream.write(CLEAR_LINE)
                self.stream.flush()
                self._drawn = ""
            if self in _SHOWN:
                _SHOWN.remove(self)

    # -- lines ------------------------------------------------------------------------------------------------
    def _line(self, text: Text) -> None:
        self.clear()
        self.c.print(text)

    def _close_step(self, what: str) -> Event | None:
        for k in range(len(self._steps) - 1, -1, -1):
            if self._steps[k][0].what == what:
                ev = self._steps[k][0]
                del self._steps[k:]
                self._wait = None
                return ev
        return None

    @staticmethod
    def _tag(step: Event) -> str:
        return f"[{step.done + 1}/{step.total}] " if step.done is not None and step.total else ""

    @staticmethod
    def _plain_wait(ev: Event) -> str:
        limit = f"/{ev.limit:.0f}s" if ev.limit else ""
        count = f", {ev.done}/{ev.total} done" if ev.done is not None and ev.total else ""
        return f"waiting for {ev.what}: {ev.elapsed:.0f}s{limit}{count}" + (f" ({ev.detail})" if ev.detail else "")

    def live_text(self) -> str:
        """The live line as it would be drawn now ("" when nothing is under way)."""
        if not self._steps and self._wait is None:
            return ""
        step, started = self._steps[-1] if self._steps else (None, self.clock())
        parts = []
        if step is not None:
            n = f"{step.done + 1}/{step.total}" if step.done is not None and step.total else str(self._count)
            parts.append(f"step {n}:")
        w = self._wait
        parts.append(f"waiting for {w.what}" if w else step.what if step else "")
        done, total = (
            (w.done, w.total)
            if w and w.total
            else ((step.done, step.total) if step is not None and step.total else (None, None))
        )
        if total:
            cells = max(5, min(20, (self.width or _columns(self.stream)) // 6))
            parts.append(f"{bar(done or 0, total, cells, unicode=self.unicode)} {done or 0}/{total}")
        if w:
            parts.append(f"{int(w.elapsed)}s" + (f"/{w.limit:.0f}s" if w.limit else ""))  # floor: never ahead
            if w.detail:
                parts.append(f"({w.detail})")
        else:
            parts.append(f"{int(self.clock() - started)}s")
        return " ".join(parts)

    def _draw(self) -> None:
        text = self.live_text()
        if not text:
            self.clear()
            return
        cols = self.width or _columns(self.stream)
        if len(text) > cols - 1:  # never wrap: a wrapped line cannot be erased with \r
            text = text[: max(0, cols - 2)] + ("…" if self.unicode else ">")
        if text == self._drawn:
            return
        self.stream.write(CLEAR_LINE + text)
        self.stream.flush()
        self._drawn = text
        if self not in _SHOWN:
            _SHOWN.append(self)
