"""`pdctl watch`'s screen. In a terminal: a live view redrawn every second, verdict first, one row per check that
is not passing (with what was expected and found), counts of the rest, and when each cadence last completed a
round. Not a terminal (a pipe, a log): one line per status change instead, as they happen; when that pipe's reader
goes away (`pdctl watch | head`), the watch ends (ReaderGone). Both read well at 80 columns: long identifiers wrap
to the next line, never cut."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol, Sequence

from pdctl.checks.result import Status
from pdctl.checks.watch_events import (
    CanaryAsked,
    ChangeUnderWay,
    CheckChanged,
    HealEvent,
    LineageChanged,
    PairCanaryDone,
    Redeclared,
    Restarted,
    RoundDone,
    RoundError,
    RoundSkipped,
    Sampled,
    TargetChanged,
    TimelineEvent,
)
from pdctl.checks.watch_outputs import OutputChanged, ReaderGone
from pdctl.checks.watch_schedule import CADENCES
from pdctl.render.escape_controls import Text

if TYPE_CHECKING:
    from threading import RLock

    from pdctl.checks.watch_state import WatchState


class Watch(Protocol):
    """What the live view reads of pdctl.ops.watch.Watch (render does not import ops)."""

    state: WatchState
    lock: RLock

    def wall(self) -> float: ...


STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.UNKNOWN: "magenta"}
_ORDER = {Status.FAIL: 0, Status.UNKNOWN: 1, Status.WARN: 2}
_COUNTED = (Status.FAIL, Status.UNKNOWN, Status.WARN, Status.PASS)


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def screen_text(state: "WatchState", now: float, *, pinned_seconds: float | None = None) -> Text:
    """The live view of `state` at unix time `now`. Pure (given the state)."""
    checks = list(state.checks.values())
    counts = {s: sum(1 for c in checks if c.status is s) for s in _COUNTED}
    with_checks = {c.target for c in checks if c.status is Status.UNKNOWN}
    silent = [t for t in state.unknown_targets() if t not in with_checks]  # unknown from their first round
    errors = state.round_errors()  # a cadence whose last round raised: its checks are not known
    counts[Status.UNKNOWN] += len(silent) + len(errors)
    verdict = state.verdict()
    out = Text()
    out.append(f"watch {state.deployment}: ", style="bold")
    out.append(verdict.upper(), style=STYLE.get(verdict, ""))
    out.append(
        f"  {counts[Status.FAIL]} failing, {counts[Status.UNKNOWN]} unknown, {counts[Status.WARN]} warning, "
        f"{counts[Status.PASS]} passing  ({_clock(now)})\n"
    )
    if state.pinned:
        out.append(f"inflight PINNED for {state.pinned_seconds(now):.0f}s\n", style="bold red")
    for c in sorted(
        (c for c in checks if c.status is not Status.PASS),
        key=lambda c: (_ORDER.get(c.status, 3), c.layer, c.target, c.check),
    ):
        out.append(f"{c.status:<7}", style=STYLE.get(c.status, ""))
        out.append(f" {c.layer} {c.target} {c.check}\n")
        found = c.observed or c.detail
        if c.status is not Status.UNKNOWN and c.expected:
            out.append(f"        expected {c.expected}; found {found}\n", style="dim")
        elif found:
            out.append(f"        {found}\n", style="dim")
        if c.status is Status.WARN and c.detail and c.detail != found:
            out.append(f"        {c.detail}\n", style="dim")
    for target in silent:
        out.append("unknown", style=STYLE[Status.UNKNOWN])
        why = (state.target_why.get(target) or "its host did not answer").removeprefix("unknown: ")
        out.append(f" {target}: {why}\n")
    for cadence, why in errors.items():
        out.append("unknown", style=STYLE[Status.UNKNOWN])
        out.append(f" the {cadence} round: {why}\n")
    for pair in state.pairs.values():
        if pair.consecutive_failures > 1:
            out.append(
                f"pair {pair.prefill} -> {pair.decode}: {pair.consecutive_failures} failed canaries in a row\n",
                style="red",
            )
    for (prefill, decode), kind in sorted(state.hazards.items()):
        out.append(f"lineage hazard {kind}: {prefill} -> {decode}\n", style="yellow")
    rounds = []
    for cadence in CADENCES:
        info = state.rounds.get(cadence)
        if info is None or info.last_complete is None:
            rounds.append(f"{cadence} -")
        else:
            skipped = f", {info.skipped} skipped" if info.skipped else ""
            rounds.append(f"{cadence} {max(0.0, now - info.last_complete):.0f}s ago ({info.seconds:.1f}s{skipped})")
    out.append("last rounds: " + "; ".join(rounds), style="dim")
    return out


def change_line(event: TimelineEvent) -> Text | None:
    """One timeline line as a line for a log (None for round lines: only changes are said); what was expected
    and found goes on an indented second line. Pure."""
    if isinstance(event, (RoundDone, Sampled, PairCanaryDone)):  # readings for the incident's charts, no change
        return None
    stamp = _clock(event.t)
    if isinstance(event, CheckChanged):
        status = event.status
        out = Text(f"{stamp} ")
        out.append(status.upper(), style=STYLE.get(status, ""))
        out.append(f" {event.layer} {event.target} {event.check}")
        if status in (Status.FAIL, Status.WARN) and event.expected:
            out.append(f"\n         expected {event.expected}; found {event.observed}", style="dim")
        elif status is Status.UNKNOWN:
            out.append(f"\n         {event.observed}", style="dim")
        return out
    who, words, observed = _said(event)
    out = Text(" ".join(x for x in (stamp, event.EVENT or "", who, *words) if x))
    if observed:
        out.append(f"\n         {observed}", style="dim")
    return out


def _said(event: TimelineEvent) -> tuple[str, tuple[str, ...], str]:
    """(who, what, observed) of an event's change line: `HH:MM:SS <event> <who> <what>`, then what was observed."""
    if isinstance(event, TargetChanged):
        return event.target, (event.status,), event.observed
    if isinstance(event, Restarted):
        return event.target, (), event.observed
    if isinstance(event, LineageChanged):
        return "", (event.status, event.hazard, event.prefill, event.decode), ""
    if isinstance(event, (RoundSkipped, RoundError)):
        return event.cadence, (), event.observed
    if isinstance(event, HealEvent):
        return "", (), event.observed
    if isinstance(event, CanaryAsked):
        return "pairs", (), event.why
    if isinstance(event, ChangeUnderWay):
        return "", (event.status,), event.observed
    if isinstance(event, Redeclared):
        return "", ("followed" if event.followed else "not followed",), event.observed
    if isinstance(event, OutputChanged):
        return event.output, (event.status,), event.observed
    return "", (), ""


class ChangeLines:
    """A timeline sink that prints each change as a line (stdout not a terminal). A check seen for the first
    time passing is not a change: those are counted, one line per layer ("PASS flags: 20 checks"). Raises
    ReaderGone once stdout's reader went away (pdctl's console then drops what is printed)."""

    name = "change lines"

    def __init__(self) -> None:
        self._seen: set[tuple[str, str, str]] = set()

    def __call__(self, events: Sequence[TimelineEvent]) -> None:
        from pdctl import render

        c = render.console()
        new_pass: dict[str, int] = {}
        for event in events:
            if isinstance(event, CheckChanged):
                key = (event.layer, event.target, event.check)
                first = key not in self._seen
                self._seen.add(key)
                if first and event.status is Status.PASS:
                    new_pass[event.layer] = new_pass.get(event.layer, 0) + 1
                    continue
            text = change_line(event)
            if text is not None:
                c.print(text)
        for layer, n in new_pass.items():
            out = Text(f"{_clock(events[0].t)} ")
            out.append("PASS", style=STYLE[Status.PASS])
            out.append(f" {layer}: {n} check{'s' if n != 1 else ''}")
            c.print(out)
        if c.quiet:  # set by pdctl's console when a write found the reader gone: nothing printed reaches anyone
            raise ReaderGone()


class LiveScreen:
    """The live view of a Watch, redrawn once a second on stdout (a terminal) until closed."""

    def __init__(self, watch: Watch):
        from rich.live import Live

        from pdctl import render

        self.watch = watch
        self._live = Live(
            get_renderable=self._render,
            console=render.console(),
            refresh_per_second=1,
            transient=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )

    def _render(self) -> Text:
        with self.watch.lock:
            return screen_text(self.watch.state, self.watch.wall())

    def __enter__(self) -> "LiveScreen":
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.stop()
