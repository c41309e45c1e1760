"""`pdctl watch`'s screen. In a terminal: a live view redrawn every second, verdict first, one row per check that
is not passing (with what was expected and found), counts of the rest, and when each cadence last completed a
round. Not a terminal (a pipe, a log): one line per status change instead, as they happen. Both read well at 80
columns: long identifiers wrap to the next line, never cut."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rich.text import Text

from pdctl.checks.watch_schedule import CADENCES

if TYPE_CHECKING:
    from pdctl.checks.watch_state import WatchState

Watch = Any  # pdctl.ops.watch.Watch: render does not import ops

STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "unknown": "magenta"}
_ORDER = {"fail": 0, "unknown": 1, "warn": 2}


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def screen_text(state: "WatchState", now: float, *, pinned_seconds: float | None = None) -> Text:
    """The live view of `state` at unix time `now`. Pure (given the state)."""
    checks = list(state.checks.values())
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("fail", "unknown", "warn", "pass")}
    with_checks = {c.target for c in checks if c.status == "unknown"}
    silent = [t for t in state.unknown_targets() if t not in with_checks]  # unknown from their first round
    errors = state.round_errors()  # a cadence whose last round raised: its checks are not known
    counts["unknown"] += len(silent) + len(errors)
    verdict = state.verdict()
    out = Text()
    out.append(f"watch {state.deployment}: ", style="bold")
    out.append(verdict.upper(), style=STYLE.get(verdict, ""))
    out.append(
        f"  {counts['fail']} failing, {counts['unknown']} unknown, {counts['warn']} warning, "
        f"{counts['pass']} passing  ({_clock(now)})\n"
    )
    if state.pinned:
        out.append(f"inflight PINNED for {state.pinned_seconds(now):.0f}s\n", style="bold red")
    for c in sorted(
        (c for c in checks if c.status != "pass"), key=lambda c: (_ORDER[c.status], c.layer, c.target, c.check)
    ):
        out.append(f"{c.status:<7}", style=STYLE[c.status])
        out.append(f" {c.layer} {c.target} {c.check}\n")
        found = c.observed or c.detail
        if c.status != "unknown" and c.expected:
            out.append(f"        expected {c.expected}; found {found}\n", style="dim")
        elif found:
            out.append(f"        {found}\n", style="dim")
        if c.status == "warn" and c.detail and c.detail != found:
            out.append(f"        {c.detail}\n", style="dim")
    for target in silent:
        out.append("unknown", style=STYLE["unknown"])
        why = (state.target_why.get(target) or "its host did not answer").removeprefix("unknown: ")
        out.append(f" {target}: {why}\n")
    for cadence, why in errors.items():
        out.append("unknown", style=STYLE["unknown"])
        out.append(f" the {cadence} round: {why}\n")
    failing_pairs = [p for p in state.pairs.values() if p.consecutive_failures > 1]
    for p in failing_pairs:
        out.append(f"pair {p.prefill} -> {p.decode}: {p.consecutive_failures} failed canaries in a row\n", style="red")
    for (p, d), kind in sorted(state.hazards.items()):
        out.append(f"lineage hazard {kind}: {p} -> {d}\n", style="yellow")
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


def change_line(line: dict[str, Any]) -> Text | None:
    """One timeline line as a line for a log (None for round lines: only changes are said); what was expected
    and found goes on an indented second line. Pure."""
    event = line.get("event")
    if event == "round":
        return None
    stamp = _clock(line.get("t", time.time()))
    if event is None:
        status = line["status"]
        out = Text(f"{stamp} ")
        out.append(status.upper(), style=STYLE.get(status, ""))
        out.append(f" {line['layer']} {line['target']} {line['check']}")
        if status in ("fail", "warn") and line.get("expected"):
            out.append(f"\n         expected {line['expected']}; found {line.get('observed', '')}", style="dim")
        elif status == "unknown":
            out.append(f"\n         {line.get('observed', '')}", style="dim")
        return out
    who = line.get("target") or line.get("cadence") or ""
    rest = " ".join(str(line[k]) for k in ("status", "hazard", "prefill", "decode") if line.get(k))
    out = Text(f"{stamp} {event} {who} {rest}".rstrip())
    if line.get("observed"):
        out.append(f"\n         {line['observed']}", style="dim")
    return out


class ChangeLines:
    """A timeline sink that prints each change as a line (stdout not a terminal). A check seen for the first
    time passing is not a change: those are counted, one line per layer ("PASS flags: 20 checks")."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str, str]] = set()

    def __call__(self, lines: list[dict[str, Any]]) -> None:
        from pdctl import render

        c = render.console()
        new_pass: dict[str, int] = {}
        for line in lines:
            if line.get("event") is None:
                key = (line["layer"], line["target"], line["check"])
                first = key not in self._seen
                self._seen.add(key)
                if first and line["status"] == "pass":
                    new_pass[line["layer"]] = new_pass.get(line["layer"], 0) + 1
                    continue
            text = change_line(line)
            if text is not None:
                c.print(text)
        for layer, n in new_pass.items():
            out = Text(f"{_clock(lines[0].get('t', time.time()))} ")
            out.append("PASS", style=STYLE["pass"])
            out.append(f" {layer}: {n} check{'s' if n != 1 else ''}")
            c.print(out)


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

    def __exit__(self, *exc) -> None:
        self._live.stop()
