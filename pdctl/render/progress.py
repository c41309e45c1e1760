"""ProgressPrinter: the progress sink of every command (pdctl.progress events) on stderr."""

from __future__ import annotations

import time

from rich.text import Text

from pdctl import render
from pdctl.progress import Event


class ProgressPrinter:
    """A progress sink writing one line per step (and a throttled line per wait) to stderr."""

    def __init__(self, quiet: bool = False):
        self.c = render.console(stderr=True)
        self.quiet = quiet
        self._last_wait = 0.0

    def __call__(self, ev: Event) -> None:
        if self.quiet:
            return
        if ev.kind == "step":
            self.c.print(Text("  -> ", style="cyan") + Text(ev.what))
        elif ev.kind == "done":
            self.c.print(Text("  ok ", style="green") + Text(f"{ev.what} ({ev.elapsed:.1f}s)"))
        elif ev.kind == "failed":
            self.c.print(Text("  !! ", style="bold red") + Text(f"{ev.what} failed after {ev.elapsed:.1f}s: {ev.detail}"))
        elif ev.kind == "waiting":
            now = time.monotonic()
            if now - self._last_wait >= 2.0:
                self._last_wait = now
                limit = f"/{ev.limit:.0f}s" if ev.limit else ""
                self.c.print(Text(f"     waiting for {ev.what}: {ev.elapsed:.0f}s{limit}" +
                                  (f" ({ev.detail})" if ev.detail else ""), style="dim"))
        elif ev.kind == "info":
            self.c.print(Text(f"     {ev.what}" + (f": {ev.detail}" if ev.detail else ""), style="dim"))
