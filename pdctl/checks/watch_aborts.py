"""Which KV transfer/bootstrap failures the watch counted are explained by client aborts, matched in time.

A client that aborts while its KV is in transfer makes a worker count a transfer failure: on the worker that saw
the abort, or on its peer (the decode's abort reaches the prefill, whose room fails; the first to fail it may
never count the abort itself). Such failures must not page anyone; failures with no abort near them must.

So each failure is matched with an abort counted within `window_s` of it (before or after, as the two counters
race by a sample): the same worker's first, then a worker of the other role. An abort explains one failure, and
only one counted near it: a decode's routine stream cancels an hour ago explain nothing now. A failure still
unmatched `window_s` after it was counted is unexplained for good, so the count only grows (a counter in all
but name: a restart of the watch takes it back to 0). Pure; pdctl.checks.watch_state feeds it each sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: an abort and the failure it causes are counted this close (the race is about one sample of the watch)
EXPLAIN_WINDOW_S = 30.0


def role_of(target: str) -> str:
    """'prefill' of 'prefill[0]@a:30000' ('' for a target that is not a worker)."""
    role = target.split("[", 1)[0]
    return role if role in ("prefill", "decode") else ""


@dataclass
class AbortLedger:
    window_s: float = EXPLAIN_WINDOW_S
    kinds: tuple[str, ...] = ("transfer", "bootstrap")  # the order a worker's failures take its aborts
    aborts: dict[str, list[list[float]]] = field(default_factory=dict)  # target -> [[t, unused]]
    pending: dict[tuple[str, str], list[list[float]]] = field(default_factory=dict)  # (target, kind) -> [[t, n]]
    unexplained: dict[tuple[str, str], float] = field(default_factory=dict)  # for good, since the start

    def observe(self, t: float, failures: dict[tuple[str, str], float], aborts: dict[str, float]) -> None:
        """One sample at time `t`: the new failures per (target, kind) and the new aborts per target since the
        last sample (increases, resets already folded in)."""
        for target, n in aborts.items():
            if n > 0:
                self.aborts.setdefault(target, []).append([t, n])
        for key, n in failures.items():
            self.unexplained.setdefault(key, 0.0)
            if n > 0:
                self.pending.setdefault(key, []).append([t, n])
        self._match()
        self._expire(t)

    def pending_count(self, key: tuple[str, str]) -> float:
        return sum(n for _t, n in self.pending.get(key, []))

    def _match(self) -> None:
        targets = sorted({k[0] for k in self.pending})
        order = [(tg, kind) for tg in targets for kind in self.kinds if self.pending.get((tg, kind))]
        for peers in (False, True):  # own aborts for every failure first, then the other role's
            for key in order:
                role = role_of(key[0])
                donors = sorted(d for d in self.aborts if (role_of(d) not in ("", role) if peers else d == key[0]))
                pool = [a for d in donors for a in self.aborts[d]]  # the entries themselves: spending marks them
                for entry in self.pending.get(key, []):
                    self._spend(entry, pool)
                self.pending[key] = [e for e in self.pending.get(key, []) if e[1] > 0]

    def _spend(self, failure: list[float], aborts: list[list[float]]) -> None:
        """Explain what is left of one failure entry [t, n] with unused aborts counted within the window of it."""
        for a in aborts:
            if failure[1] <= 0:
                return
            if a[1] > 0 and abs(a[0] - failure[0]) <= self.window_s:
                took = min(a[1], failure[1])
                a[1], failure[1] = a[1] - took, failure[1] - took

    def _expire(self, t: float) -> None:
        for key, entries in self.pending.items():
            for e in entries:
                if t - e[0] > self.window_s:
                    self.unexplained[key] += e[1]
            self.pending[key] = [e for e in entries if t - e[0] <= self.window_s]
        for target, entries in self.aborts.items():  # an abort older than the window can explain no failure
            self.aborts[target] = [a for a in entries if a[1] > 0 and t - a[0] <= self.window_s]
