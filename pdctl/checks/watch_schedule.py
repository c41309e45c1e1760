"""When each of `pdctl watch`'s cadences runs: a tick is due every `every` seconds; a tick that comes while the
previous round of the same cadence still runs is skipped (and counted), never queued, so a slow round cannot pile
rounds up behind it; but one skipped tick is owed, and falls due the moment that round finishes, so a round a
little longer than its period (a 30.04 s canary round every 30 s) does not halve the cadence. Pure: the caller
passes the clock reading."""

from __future__ import annotations

from dataclasses import dataclass

from pdctl.checks.layers import WATCH_CADENCES, layer

#: the watch's cadences, derived from the layers (checks/layers.py): one per layer that owns a round
CADENCES: tuple[str, ...] = WATCH_CADENCES

RUN = "run"
SKIP = "skip"


@dataclass
class CadenceClock:
    name: str
    every: float
    next_due: float = 0.0  # clock reading of the next tick (0: at the first look)
    running: bool = False  # a round of this cadence has started and not finished
    skipped: int = 0  # ticks skipped because the previous round still ran
    owed: bool = False  # a tick was skipped: the next falls due when the running round finishes

    def __post_init__(self) -> None:
        if not self.every > 0:
            raise ValueError(f"{self.name}: every must be > 0 seconds, got {self.every!r}")

    def tick(self, now: float) -> str | None:
        """RUN when a round is due and none runs (the round is marked running); SKIP when due but the previous
        round still runs (that tick is dropped: the next is one period later); None when not due."""
        if now < self.next_due:
            return None
        # the next tick one period after this one, or a period from now when the clock fell a period behind
        # (a late wake-up, a suspended laptop): never a burst of catch-up rounds
        nxt = self.next_due + self.every
        self.next_due = nxt if nxt > now else now + self.every
        if self.running:
            self.skipped += 1
            self.owed = True
            return SKIP
        self.running = True
        return RUN

    def finished(self) -> None:
        self.running = False
        if self.owed:  # at most one owed tick: due at the next look, then the period again
            self.owed, self.next_due = False, 0.0

    def due_now(self) -> None:
        """Make the next tick due at the next look (after a heal, its evidence is to be read afresh)."""
        self.next_due = 0.0

    def due_in(self, seconds: float, now: float) -> None:
        """Make the next tick due `seconds` from `now` when that is sooner than its period (a confirmation)."""
        self.next_due = min(self.next_due, now + seconds)

    def wait_s(self, now: float) -> float:
        """Seconds until this cadence's next tick (0 when due)."""
        return max(0.0, self.next_due - now)


def cadence_periods(settings: object) -> dict[str, float]:
    """cadence -> seconds between its rounds, read from the inventory's WatchSettings (typed `object` here: checks
    imports no inventory) by the field each cadence's layer names (`Layer.every`). Pure."""
    return {name: float(getattr(settings, str(layer(name).every))) for name in CADENCES}


def short_watch_warning(for_s: float | None, once: bool, window_s: float, interval_s: float) -> str | None:
    """Why `watch --for SECONDS` cannot end with an inflight verdict, or None: the window is judged only once it is
    sampled end to end, and the first sample comes a start-up after the watch begins (connections, first reads),
    so a watch no longer than the window plus two sample intervals ends on an inconclusive inflight (WARN)."""
    need = window_s + 2 * interval_s
    if for_s is None or once or for_s >= need:
        return None
    return (
        f"--for {for_s:g}: the inflight window ({window_s:g}s, inventory watch.inflight_window) cannot be "
        f"sampled end to end in that time, so its verdict will be inconclusive (WARN); give --for {need:g} or "
        "more, or --once"
    )
