"""`pdctl watch`'s screen. In a terminal: a live view redrawn every second, of the terminal's height: the verdict
first, then the one command to run next for what fails, where the exporter listens and the timeline is written,
one row per check that is not passing (with what was expected and found), counts of the rest, and when each cadence
last completed a round; what does not fit is left out from the least important up, and said to be. Not a terminal
(a pipe, a log): one line per status change instead, as they happen; when that pipe's reader goes away
(`pdctl watch | head`), the watch ends (ReaderGone). Both read well at 80 columns: rows wrap at spaces and continue
indented, identifiers are never cut."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

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
from pdctl.render.indented_rows import wrap_indented

if TYPE_CHECKING:
    from threading import RLock

    from pdctl.checks.watch_records import CheckState
    from pdctl.checks.watch_state import WatchState


class Watch(Protocol):
    """What the live view reads of pdctl.ops.watch.Watch (render does not import ops)."""

    state: WatchState
    lock: RLock
    exporter_url: str  # its /metrics URL, "" when it serves none

    @property
    def timeline(self) -> str | None: ...

    def wall(self) -> float: ...


STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.UNKNOWN: "magenta"}
_ORDER = {Status.FAIL: 0, Status.UNKNOWN: 1, Status.WARN: 2}
_COUNTED = (Status.FAIL, Status.UNKNOWN, Status.WARN, Status.PASS)
#: rows the live view leaves free below itself: the shell's prompt and the line saying why the watch stopped, so
#: its last frame keeps the verdict in view once the watch ends
LIVE_ROWS_LEFT = 2
_MORE = "pdctl verify final-health -v shows every check"


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


@dataclass(frozen=True)
class Where:
    """Where a running watch's outputs are: its screen says so, for the person who wants to scrape or read them."""

    exporter: str = ""  # the URL of its /metrics ("" when it serves none)
    timeline: str | None = None  # --timeline: a file, "-" (stdout), None (no timeline)

    def said(self) -> str:
        if self.timeline == "-":
            timeline = "stdout"
        else:
            timeline = os.path.abspath(self.timeline) if self.timeline else "none"
        return f"exporter {self.exporter or 'none'}; timeline {timeline}"


@dataclass(frozen=True)
class NextStep:
    command: str  # a pdctl command line, maybe with its own "(why)" (a check's next_step)
    why: str = ""  # what it answers, when the command does not say it itself


def next_step(state: WatchState) -> NextStep | None:
    """The one command to run next for what fails; None when nothing fails. A case the heal knows (pdctl.checks.heal)
    confirmed (a pin; a pair broken PAIR_BROKEN_AFTER canaries in a row, or failing with a lineage hazard) names the
    heal's own action; else the failing checks' typed next_step: theirs when they agree, `pdctl triage` (which tells
    causes apart) when they differ or none names one. Pure."""
    from pdctl.checks.heal import HealView, smallest_action
    from pdctl.checks.result import NEXT_TRIAGE
    from pdctl.checks.watch_state import PAIR_BROKEN_AFTER

    def heal_action(case: str) -> str:
        prefills = {p for p, _ in state.pairs}
        decodes = {d for _, d in state.pairs}
        view = HealView(None, {}, (), (), len(prefills), len(decodes))
        return f"pdctl {smallest_action(case, view)}"

    if state.pinned:
        return NextStep(heal_action("pinned"), "inflight pinned: a pinned room never drains")
    broken = [
        p
        for key, p in state.pairs.items()
        if p.status is Status.FAIL and (p.consecutive_failures >= PAIR_BROKEN_AFTER or key in state.hazards)
    ]
    if broken:
        p = max(broken, key=lambda p: p.consecutive_failures)
        short = f"{p.prefill.split('@', 1)[0]} -> {p.decode.split('@', 1)[0]}"  # the hosts: in the rows below
        why = f"{short} broken: {p.consecutive_failures} failed canaries"
        if (p.prefill, p.decode) in state.hazards:
            why += f", lineage {state.hazards[(p.prefill, p.decode)]}"
        more = len(broken) - 1
        return NextStep(heal_action("pair-broken"), why + (f"; {more} more pair(s)" if more else ""))
    failing = [c for c in _not_passing(state) if c.status is Status.FAIL]
    if not failing:
        return None
    steps = list(dict.fromkeys(c.next_step for c in failing if c.next_step))
    return NextStep(steps[0] if len(steps) == 1 else NEXT_TRIAGE)


def _not_passing(state: WatchState) -> list[CheckState]:
    return sorted(
        (c for c in state.checks.values() if c.status is not Status.PASS),
        key=lambda c: (_ORDER.get(c.status, 3), c.layer, c.target, c.check),
    )


def _line(*parts: str | tuple[str, str]) -> Text:
    out = Text()
    for part in parts:
        out.append(*((part,) if isinstance(part, str) else part))
    return out


def screen_text(
    state: "WatchState",
    now: float,
    *,
    where: Where | None = None,
    width: int | None = None,
    rows: int | None = None,
) -> Text:
    """The view of `state` at unix time `now`: the verdict, the next command for what fails, where the exporter and
    timeline are (`where`, when running), then what is not passing, and when each cadence last completed a round.
    Rows are wrapped at spaces to `width` (the console's by default) and continue indented. With `rows` (the live
    view's fixed height) the least important rows are left out to fit, and said to be; the verdict, the next
    command and where stay. Pure (given the state)."""
    if width is None:
        from pdctl import render

        width = render.console().width
    checks = list(state.checks.values())
    counts = {s: sum(1 for c in checks if c.status is s) for s in _COUNTED}
    with_checks = {c.target for c in checks if c.status is Status.UNKNOWN}
    silent = [t for t in state.unknown_targets() if t not in with_checks]  # unknown from their first round
    errors = state.round_errors()  # a cadence whose last round raised: its checks are not known
    counts[Status.UNKNOWN] += len(silent) + len(errors)
    verdict = state.verdict()

    def rows_of(line: Text, indent: int = 2) -> list[Text]:
        return wrap_indented(line, width, indent)

    head = rows_of(
        _line(
            (f"watch {state.deployment}: ", "bold"),
            (verdict.upper(), STYLE.get(verdict, "")),
            f"  {counts[Status.FAIL]} failing, {counts[Status.UNKNOWN]} unknown, {counts[Status.WARN]} warning, "
            f"{counts[Status.PASS]} passing",
        )
    )
    step = next_step(state)
    if step is not None:
        why = f"  ({step.why})" if step.why else ""
        head += rows_of(_line(("next: ", "bold"), (step.command, "bold"), why), 6)
    if where is not None:
        head += rows_of(_line((where.said(), "dim")), 2)
    # what is not passing, the most important first: each item a row (wrapped) and its details, dropped first
    items: list[tuple[list[Text], list[Text]]] = []
    if state.pinned:
        items.append((rows_of(_line((f"inflight PINNED for {state.pinned_seconds(now):.0f}s", "bold red"))), []))
    for pair in state.pairs.values():
        if pair.consecutive_failures > 1:
            said = f"pair {pair.prefill} -> {pair.decode}: {pair.consecutive_failures} failed canaries in a row"
            items.append((rows_of(_line((said, "red"))), []))
    for (prefill, decode), kind in sorted(state.hazards.items()):
        items.append((rows_of(_line((f"lineage hazard {kind}: {prefill} -> {decode}", "yellow"))), []))
    for c in _not_passing(state):
        details: list[Text] = []
        found = c.observed or c.detail
        if c.status is not Status.UNKNOWN and c.expected:
            details += rows_of(_line((f"        expected {c.expected}; found {found}", "dim")), 10)
        elif found:
            details += rows_of(_line((f"        {found}", "dim")), 10)
        if c.status is Status.WARN and c.detail and c.detail != found:
            details += rows_of(_line((f"        {c.detail}", "dim")), 10)
        row = _line((f"{c.status:<7}", STYLE.get(c.status, "")), f" {c.layer} {c.target} {c.check}")
        items.append((rows_of(row, 8), details))
    for target in silent:
        why = (state.target_why.get(target) or "its host did not answer").removeprefix("unknown: ")
        items.append((rows_of(_line(("unknown", STYLE[Status.UNKNOWN]), f" {target}: {why}"), 8), []))
    for cadence, why in errors.items():
        items.append((rows_of(_line(("unknown", STYLE[Status.UNKNOWN]), f" the {cadence} round: {why}"), 8), []))
    said_rounds = []
    for cadence in CADENCES:
        info = state.rounds.get(cadence)
        if info is None or info.last_complete is None:
            said_rounds.append(f"{cadence} -")
        else:
            skipped = f", {info.skipped} skipped" if info.skipped else ""
            said_rounds.append(
                f"{cadence} {max(0.0, now - info.last_complete):.0f}s ago ({info.seconds:.1f}s{skipped})"
            )
    tail = rows_of(_line((f"{_clock(now)} last rounds: " + "; ".join(said_rounds), "dim")), 2)
    body = _fit(len(head) + len(tail), items, rows, rows_of)
    return Text("\n").join(head + body + tail)


def _fit(
    fixed: int, items: list[tuple[list[Text], list[Text]]], rows: int | None, rows_of: Callable[[Text], list[Text]]
) -> list[Text]:
    """The body's rows within `rows` less the `fixed` rows around it: the details of the last items go first,
    then the last items whole; a row says what was left out and where to see it. Pure."""
    shown = len(items)  # the first `shown` items are on the screen
    bare: set[int] = set()  # items shown without their details

    def note() -> list[Text]:
        left = [f"{len(items) - shown} more rows"] if shown < len(items) else []
        n = sum(1 for k in bare if k < shown)
        left += [f"the expected and found of {n}"] if n else []
        if not left:
            return []
        return rows_of(_line((f"not shown to fit the screen: {' and '.join(left)} ({_MORE})", "dim")))

    def total() -> int:
        body = sum(len(h) + (0 if k in bare else len(d)) for k, (h, d) in enumerate(items[:shown]))
        return fixed + body + len(note())

    if rows is not None:
        for k in reversed(range(len(items))):
            if total() <= rows:
                break
            if items[k][1]:
                bare.add(k)
        while shown and total() > rows:
            shown -= 1
    body = [r for k, (h, d) in enumerate(items[:shown]) for r in h + ([] if k in bare else d)]
    return body + note()


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
        self._console = render.console()
        self._live = Live(
            get_renderable=self._render,
            console=self._console,
            refresh_per_second=1,
            transient=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )

    def _render(self) -> Text:
        size = self._console.size  # the terminal's, read at each frame: a resized window is followed
        where = Where(self.watch.exporter_url, self.watch.timeline)
        with self.watch.lock:
            return screen_text(
                self.watch.state, self.watch.wall(), where=where, width=size.width, rows=size.height - LIVE_ROWS_LEFT
            )

    def __enter__(self) -> "LiveScreen":
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.stop()
