"""The lines of `pdctl watch`'s timeline, typed: one frozen dataclass per kind of line, each written as exactly its
JSON line by `to_line()` (docs/watch.md "The timeline": the line format is a contract, `--timeline` files are read
by log shippers and `jq`).

Every line starts with "t" (unix time) and "deployment"; then "event" (the class's EVENT; a check's status line has
none), then the class's own fields in their declared order. A field named in OMIT_EMPTY is left out when "".
Where a new kind goes: a class here (its EVENT and fields), a row in docs/watch.md, and a case in
pdctl.render.watch_screen.change_line if the screen's change lines should word it their own way. Pure.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, ClassVar, Literal, Sequence

from pdctl.checks.result import Status

#: one JSON line of the timeline: flat, with JSON scalars only
TimelineLine = dict[str, str | float | bool | None]


@dataclass(frozen=True)
class TimelineEvent:
    t: float  # unix time of the change
    deployment: str

    EVENT: ClassVar[str | None] = None  # the line's "event" (None: no "event" key)
    OMIT_EMPTY: ClassVar[tuple[str, ...]] = ()

    def to_line(self) -> TimelineLine:
        """This event as its JSON line (docs/watch.md), keys in the contract's order."""
        line: TimelineLine = {"t": self.t, "deployment": self.deployment}
        if self.EVENT is not None:
            line["event"] = self.EVENT
        for f in dataclasses.fields(self)[2:]:
            value = getattr(self, f.name)
            if f.name in self.OMIT_EMPTY and value == "":
                continue
            line[f.name] = value.value if isinstance(value, Status) else value
        return line


#: what a watch sends its lines to (the --timeline writer, the change lines of a log): each batch in order
TimelineSink = Callable[[Sequence[TimelineEvent]], None]


@dataclass(frozen=True)
class CheckChanged(TimelineEvent):
    """A check seen for the first time, or whose status changed."""

    cadence: str
    layer: str
    target: str
    check: str
    status: Status  # pass | warn | fail | unknown
    observed: str
    expected: str


@dataclass(frozen=True)
class TargetChanged(TimelineEvent):
    """A target whose host did not answer (unknown), or answers again (recovered)."""

    EVENT = "target"
    OMIT_EMPTY = ("observed",)

    target: str
    status: Literal["unknown", "recovered"]
    observed: str = ""  # an unknown target: why (which host, what it said)


@dataclass(frozen=True)
class Restarted(TimelineEvent):
    """A process restarted: a counter that dropped, or a changed pid."""

    EVENT = "restart"

    target: str
    observed: str


@dataclass(frozen=True)
class LineageChanged(TimelineEvent):
    """A pair the lineage judge calls hazardous appeared, or cleared."""

    EVENT = "lineage"

    prefill: str
    decode: str
    hazard: str
    status: Literal["hazard", "cleared"]


@dataclass(frozen=True)
class RoundDone(TimelineEvent):
    EVENT = "round"

    cadence: str
    ok: bool  # no failed check of this cadence
    seconds: float


@dataclass(frozen=True)
class RoundSkipped(TimelineEvent):
    """A tick that came while the same cadence's previous round still ran."""

    EVENT = "skip"

    cadence: str
    observed: str = "its previous round still runs: this tick was skipped"


@dataclass(frozen=True)
class RoundError(TimelineEvent):
    """A round (or a hook after it) raised; the watch goes on."""

    EVENT = "error"

    cadence: str
    observed: str  # "<what> raised <type>: <first line>"


@dataclass(frozen=True)
class CanaryAsked(TimelineEvent):
    """A pair canary round run at once, not at its period: a worker counted KV failures (they stand or not by
    what it finds), the router's canary failed, or a failing pair is confirmed."""

    EVENT = "canary"

    why: str


@dataclass(frozen=True)
class ChangeUnderWay(TimelineEvent):
    """A pdctl operation took the deployment lock (a deploy, restart or heal: its restarts are planned), or let
    it go."""

    EVENT = "change"

    status: Literal["started", "ended"]
    observed: str  # who holds it and for what (started), who held it (ended)


@dataclass(frozen=True)
class Redeclared(TimelineEvent):
    """The inventory the watch judges against changed: followed (what changed), or not (why)."""

    EVENT = "declared"

    followed: bool
    observed: str


HealOutcome = Literal["started", "done", "failed", "refused", "dry"]


@dataclass(frozen=True)
class HealEvent(TimelineEvent):
    """The heal's own line (pdctl.ops.heal): a case it acts on, refuses, or would act on (--heal=dry)."""

    EVENT = "heal"
    OMIT_EMPTY = ("detail",)

    outcome: HealOutcome
    case: str
    action: str
    observed: str
    detail: str = ""


@dataclass(frozen=True)
class Sampled(TimelineEvent):
    """A worker's queues and KV failure counters as the inflight round read them: its first sample, then when they
    changed (a counter at once, the queues at most once per checks.watch_samples.SAMPLE_EVERY_S), so that the
    incident write-up (`pdctl incident`) can chart them. Not a change line on the watch's screen."""

    EVENT = "sample"

    target: str
    queued: float  # the PD queue gauges of its side (prefill bootstrap + inflight; decode prealloc + transfer)
    running: float  # a decode's sglang:num_running_reqs (0 on a prefill: not in its sample)
    transfer_failed: float  # the counter's value as read (it drops when the process restarts)
    bootstrap_failed: float


@dataclass(frozen=True)
class PairCanaryDone(TimelineEvent):
    """One pair canary of the watch's pairs round: its result and latency (the KV transfer time, else the decode's
    answer time; None when unknown or failed before it answered). Charted by `pdctl incident`; not a change line."""

    EVENT = "pair"

    prefill: str
    decode: str
    status: str  # pass | fail | unknown
    latency_s: float | None
