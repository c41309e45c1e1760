"""Which KV transfer/bootstrap failures the watch counted stand: a counter raises suspicion, a canary decides.

A worker's failure counter rises when its pair is broken (the seed's degraded bootstrap: every transfer through
it fails) and also when a client goes away while its KV is in transfer (an abort storm, clients timing out). The
counters cannot tell the two apart, and the aborts counted near a failure cannot either: a client that times out
on a broken pair aborts too, so aborts follow real breakage (pdctl's own canaries among them). So a new failure is
only suspect: the watch sends a canary through every pair at once (pdctl.ops.watch), and the canary decides. One
that passes after the failure explains it (the worker's pairs work); one that fails makes it stand. A failure that
no canary decided within `decide_within_s` stands too (no canary could run, or every one was unknown).

What stands counts for its worker's current process only and for at most `window_s`: a worker's restart wipes its
own (those failures were that process's), a heal wipes all, and the window ends the rest, so every alert on it
resolves after the fix. Pure: pdctl.checks.watch_state feeds it each sample and each canary round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pdctl.checks.result import Status

#: how long a failure that stands keeps its worker's transfer check failing (then it has been seen long enough)
STANDING_WINDOW_S = 600.0
#: a failure no canary decided within this stands (two pair rounds at the default cadence)
DECIDE_WITHIN_S = 90.0

Key = tuple[str, str]  # (target, kind)


@dataclass
class Counted:
    t: float  # unix time the watch saw the counter rise
    n: float  # by how much


@dataclass
class FailureLedger:
    window_s: float = STANDING_WINDOW_S
    decide_within_s: float = DECIDE_WITHIN_S
    pending: dict[Key, list[Counted]] = field(default_factory=dict)  # awaiting a canary
    standing: dict[Key, list[Counted]] = field(default_factory=dict)  # a canary failed (or none decided)
    explained: dict[Key, float] = field(default_factory=dict)  # a canary passed after them (since the restart)

    def observe(self, t: float, failures: Mapping[Key, float]) -> None:
        """One sample at `t`: each (target, kind)'s new failures since the last sample (resets folded in)."""
        for key, n in failures.items():
            self.pending.setdefault(key, [])
            self.standing.setdefault(key, [])
            self.explained.setdefault(key, 0.0)
            if n > 0:
                self.pending[key].append(Counted(t, n))
        self._expire(t)

    def suspects(self) -> list[str]:
        """Workers with failures awaiting a canary."""
        return sorted({target for (target, _kind), entries in self.pending.items() if entries})

    def newest_pending(self) -> float | None:
        return max((e.t for entries in self.pending.values() for e in entries), default=None)

    def decide(self, started: float, verdicts: Mapping[str, Status]) -> None:
        """A canary round that started at `started` (unix time): worker -> PASS (every pair through it passed),
        FAIL (one failed) or UNKNOWN. The failures counted before the round started are decided by it; those
        counted since wait for the next one, and an unknown canary decides nothing."""
        for key, entries in self.pending.items():
            verdict = verdicts.get(key[0])
            if verdict not in (Status.PASS, Status.FAIL):
                continue
            decided = [e for e in entries if e.t <= started]
            self.pending[key] = [e for e in entries if e.t > started]
            if verdict is Status.PASS:
                self.explained[key] = self.explained.get(key, 0.0) + sum(e.n for e in decided)
            else:
                self.standing.setdefault(key, []).extend(decided)

    def forget(self, target: str | None = None) -> None:
        """`target`'s process restarted (None: a heal restarted the deployment): what it counted no longer says
        anything about what runs now."""
        for book in (self.pending, self.standing):
            for key in book:
                if target is None or key[0] == target:
                    book[key] = []
        for key in self.explained:
            if target is None or key[0] == target:
                self.explained[key] = 0.0

    def drop(self, target: str) -> None:
        """`target` is no longer declared: nothing of it is reported any more."""
        for book in (self.pending, self.standing, self.explained):
            for key in [k for k in book if k[0] == target]:
                del book[key]

    def unexplained(self) -> dict[Key, float]:
        """(target, kind) -> failures that stand now (0 for every worker read)."""
        return {key: sum(e.n for e in self.standing.get(key, [])) for key in self.pending}

    def pending_count(self, key: Key) -> float:
        return sum(e.n for e in self.pending.get(key, []))

    def _expire(self, t: float) -> None:
        for key, entries in self.pending.items():
            late = [e for e in entries if t - e.t > self.decide_within_s]
            if late:
                self.standing.setdefault(key, []).extend(late)
                self.pending[key] = [e for e in entries if t - e.t <= self.decide_within_s]
        for key, entries in self.standing.items():
            self.standing[key] = [e for e in entries if t - e.t <= self.window_s]
