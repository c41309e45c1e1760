"""ProgressPrinter: in a terminal one live line redrawn in place and cleared before any other line, a kept line per
finished step, a bar where done/total is known; piped, plain lines with at most one waiting line per few seconds;
--json stays quiet only when stderr is not a terminal."""

from __future__ import annotations

import io
import re

from pdctl.progress import Event, Progress
from pdctl.render.progress import CLEAR_LINE, ProgressPrinter, clear_live

ANSI = re.compile(r"\x1b\[[0-9;]*m")


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _screen(raw: str) -> list[str]:
    """What a terminal would show: each \\r + clear-line erases the current line; styles dropped."""
    lines, cur = [], ""
    raw = ANSI.sub("", raw)
    i = 0
    while i < len(raw):
        if raw.startswith(CLEAR_LINE, i):
            cur = ""
            i += len(CLEAR_LINE)
        elif raw[i] == "\n":
            lines.append(cur)
            cur = ""
            i += 1
        else:
            cur += raw[i]
            i += 1
    return lines + ([cur] if cur else [])


def _tty_printer(width: int = 100):
    s = FakeTTY()
    return s, ProgressPrinter(stream=s, live=None, clock=Clock(), width=width)


def test_a_terminal_gets_one_live_line_redrawn_and_a_kept_line_per_finished_step():
    s, p = _tty_printer()
    assert p.live  # decided by the stream's isatty()
    prog = Progress(sink=p)
    with prog.step("restart prefill[0]", index=0, total=6):
        for k in range(3):
            prog.waiting("prefill[0] ready", float(k), 120.0, "/health: ConnectError")
    raw = s.getvalue()
    # each redraw goes back to the line start and clears it: no line feed between waits
    assert raw.count(CLEAR_LINE + "step 1/6: waiting for prefill[0] ready") == 3
    assert "\n" not in raw.split("ok ")[0]
    assert "2s/120s" in raw and "(/health: ConnectError)" in raw
    screen = _screen(raw)
    assert screen == [screen[0]] and "ok [1/6] restart prefill[0]" in screen[0]  # only the kept line remains
    assert "waiting" not in screen[0]


def test_the_live_line_is_cleared_before_any_other_output_and_never_wraps():
    s, p = _tty_printer(width=40)
    p(Event("step", "storm: 90 requests, target random"))
    p(Event("waiting", "storm requests", 12.0, 60.0, done=45, total=90))
    shown = s.getvalue().split(CLEAR_LINE)[-1]
    assert 0 < len(shown) <= 39  # cut to the width: a wrapped line cannot be erased
    clear_live()  # what render.console() / emit_json() call first
    assert s.getvalue().endswith(CLEAR_LINE)
    assert _screen(s.getvalue()) == []
    # a shorter line after a longer one leaves nothing of the longer one behind
    p(Event("waiting", "x", 1.0, 2.0))
    assert _screen(s.getvalue()) == ["step 1: waiting for x 1s/2s"]


def test_render_console_clears_the_live_line_first(monkeypatch):
    from pdctl import render

    s, p = _tty_printer()
    p(Event("waiting", "decode[0] ready", 3.0, 120.0))
    assert not s.getvalue().endswith(CLEAR_LINE)
    render.console(stderr=True)
    assert s.getvalue().endswith(CLEAR_LINE)


def test_a_bar_shows_done_of_total():
    s, p = _tty_printer()
    p(Event("step", "storm: 90 requests, target random"))
    p(Event("waiting", "storm requests", 12.0, 60.0, done=45, total=90))
    line = p.live_text()
    assert "45/90" in line and "12s/60s" in line
    cells = re.search(r"\[([#-]+)\]", line).group(1)  # a StringIO has no utf encoding: the ASCII bar
    assert cells.count("#") == cells.count("-") and len(cells) >= 5
    p(Event("done", "storm: 90 requests, target random", 30.0))
    assert p.live_text() == ""  # nothing under way: no live line
    assert ANSI.sub("", s.getvalue()).endswith("(30.0s)\n")


def test_restart_steps_bar_counts_finished_steps_and_a_failure_is_kept():
    s, p = _tty_printer()
    prog = Progress(sink=p)
    with prog.step("restart prefill[0]", index=0, total=4):
        pass
    try:
        with prog.step("wait prefill[0] ready", index=1, total=4):
            assert "1/4" in p.live_text() and "step 2/4" in p.live_text()
            raise RuntimeError("prefill[0] not ready after 5s (ready_timeout)")
    except RuntimeError:
        pass
    screen = _screen(s.getvalue())
    assert screen[0].strip().startswith("ok [1/4] restart prefill[0]")
    assert "!! [2/4] wait prefill[0] ready failed after" in screen[1] and "ready_timeout" in screen[1]


def test_piped_plain_lines_at_most_one_waiting_line_per_few_seconds():
    s, clock = io.StringIO(), Clock()
    p = ProgressPrinter(stream=s, clock=clock, every_s=5.0)
    assert not p.live
    p(Event("step", "wait decode[0] ready"))
    for k in range(40):  # 10 s of waits every 0.25 s
        p(Event("waiting", "decode[0] ready", k * 0.25, 120.0, "/health 503"))
        clock.t += 0.25
    out = s.getvalue()
    assert CLEAR_LINE not in out and "\r" not in out
    waits = [ln for ln in out.splitlines() if "waiting for decode[0] ready" in ln]
    assert len(waits) == 2, out  # at t=0 and t=5, not one per poll
    assert "-> wait decode[0] ready" in out
    p(Event("waiting", "storm requests", 1.0, 60.0, done=3, total=90))
    clock.t += 5
    p(Event("waiting", "storm requests", 6.0, 60.0, done=30, total=90))
    assert "waiting for storm requests: 6s/60s, 30/90 done" in s.getvalue()


def test_quiet_prints_nothing():
    s = FakeTTY()
    p = ProgressPrinter(quiet=True, stream=s)
    p(Event("step", "x"))
    p(Event("waiting", "x", 1.0, 2.0))
    p(Event("done", "x", 1.0))
    assert s.getvalue() == ""


def test_json_is_quiet_only_when_stderr_is_not_a_terminal():
    from pdctl.cli.common import progress_quiet

    assert progress_quiet(True, io.StringIO()) is True  # a script reading the document: silent
    assert progress_quiet(True, FakeTTY()) is False  # a person at a terminal: progress on stderr
    assert progress_quiet(False, io.StringIO()) is False
    assert progress_quiet(False, FakeTTY()) is False


def test_a_step_the_command_reports_itself_leaves_no_line_on_a_terminal_but_does_when_piped():
    """verify final-health and triage print final-health's verdict first: its '!! failed after' line would only
    push that verdict off the first row of a terminal; piped, the line stays (a log keeps every step)."""
    for live, kept in ((True, False), (False, True)):
        s = FakeTTY() if live else io.StringIO()
        p = ProgressPrinter(stream=s, live=live, clock=Clock(), width=100, reported=frozenset({"final-health"}))
        prog = Progress(sink=p)
        prog.emit(Event("step", "final-health"))
        prog.emit(Event("failed", "final-health", 0.4, detail="2 check(s) failed"))
        prog.emit(Event("step", "restart decode[0]"))
        prog.emit(Event("failed", "restart decode[0]", 1.0, detail="exit 1"))
        shown = "\n".join(_screen(s.getvalue()))
        assert ("final-health failed after" in shown) is kept, shown
        assert "restart decode[0] failed after 1.0s: exit 1" in shown  # a step not reported stays on screen
