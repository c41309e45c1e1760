"""The console every printer writes to, the one JSON document, and the error / warning / plain lines."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Iterable

from rich.console import Console

from pdctl import render
from pdctl.checks.result import Status
from pdctl.render.escape_controls import Text
from pdctl.render.pdctl_console import PdctlConsole

STATUS_STYLE = {
    Status.PASS: "green",
    Status.WARN: "yellow",
    Status.FAIL: "bold red",
    Status.SKIP: "dim",
    Status.UNKNOWN: "magenta",
}


def console(stderr: bool = False) -> Console:
    """The console to print on now: any live progress line is cleared first; while a --report is being
    recorded, the recording console of that stream (pdctl.render.report)."""
    from pdctl.render import progress, report

    progress.clear_live()
    recording = report.recording_console(stderr)
    if recording is not None:
        return recording
    return _new_console(stderr)


def _new_console(stderr: bool, console_class: type[PdctlConsole] = PdctlConsole, **kw: Any) -> PdctlConsole:
    stream = sys.stderr if stderr else sys.stdout
    if os.environ.get("COLUMNS", "").isdigit() and int(os.environ["COLUMNS"]) > 0:
        width: int | None = int(os.environ["COLUMNS"])  # (0: an unsized pty; rich would print nothing at all)
    else:
        # Piped into a file or a pager: rich would assume 80 columns and fold every table cell.
        width = None if stream.isatty() else 160
    return console_class(stderr=stderr, width=width, highlight=False, soft_wrap=False, **kw)


def start_report() -> None:
    """Start recording what is printed, for a --report (saved by pdctl.render.report.save)."""
    from functools import partial

    from pdctl.render import report

    report.start(partial(_new_console, False), partial(_new_console, True))


def emit_json(doc: Any) -> None:
    """Exactly one JSON document on stdout, nothing else (a --report being recorded keeps a copy)."""
    from pdctl.render import progress, report

    progress.clear_live()
    text = json.dumps(doc, indent=2, default=str)
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        from pdctl.broken_pipe import drop_rest_of_output

        if not drop_rest_of_output():
            raise
    report.record_text(text)


def error(message: str, hint: str | None = None, code: int | None = None) -> None:
    from pdctl.secrets import mask_text

    message, hint = mask_text(message), (mask_text(hint) if hint else hint)
    c = render.console(stderr=True)
    c.print(Text("error: ", style="bold red") + Text(message))
    if hint:
        c.print(Text("hint: ", style="yellow") + Text(hint))


def warning(message: str) -> None:
    """A warning on stderr (e.g. an abandoned lock taken over): said, but not an error."""
    from pdctl.secrets import mask_text

    render.console(stderr=True).print(Text("warning: ", style="yellow") + Text(mask_text(message)))


def lines(items: Iterable[str], style: str | None = None) -> None:
    c = render.console()
    for s in items:
        c.print(Text(s, style=style or ""))


def wrapped(text: str, style: str | None = None) -> None:
    """One message wrapped to the console, never inside a command (`quoted`, or a word and its --option), the
    lines after the first indented by two."""
    from pdctl.render.layout import wrap_keeping_commands

    c = render.console()
    for k, line in enumerate(wrap_keeping_commands(text, c.width - 2, glue_options=True)):
        c.print(Text(("  " if k else "") + line, style=style or ""))


def plan_lines(steps: Iterable[str]) -> None:
    """`plan:` then each step numbered on its own line; a step wider than the console wraps at spaces under its
    own text, so a role label with its host is never split and every step still starts a line."""
    from pdctl.render.layout import wrap_keeping_commands

    c = render.console()
    c.print(Text("plan:"))
    for i, step in enumerate(steps, 1):
        head = f"  {i}. "
        for k, line in enumerate(wrap_keeping_commands(step, c.width - len(head))):
            c.print(Text((head if k == 0 else " " * len(head)) + line))
