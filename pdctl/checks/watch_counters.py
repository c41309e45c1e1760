"""Counters followed across restarts of the process that exposes them (`pdctl watch`'s failures since start).

A Prometheus counter starts again at 0 when its process restarts. The watch must neither read that drop as a
failure nor let it hide the failures counted before: the total since the watch started carries on, and the drop
itself is the evidence of a restart. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class CounterTrack:
    """One counter series of one target: its last raw value and what it counted since the watch first read it."""

    last: float | None = None  # the last raw value read (None: never read)
    total: float = 0.0  # increase since the first read, across resets
    resets: int = 0  # drops seen (each one a restart of the exposing process)

    def observe(self, value: float | None) -> bool:
        """Fold in one read; True when it shows a reset. The first read is the baseline (it adds 0). A drop below
        the last value is a reset: the new process counted `value` since it started, so that is added. Limit: a
        process that restarted and counted past the old value before the next read looks like no reset (its
        first failures are then undercounted by the old value). None or NaN (not read) changes nothing."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return False
        value = float(value)
        if self.last is None:
            self.last = value
            return False
        reset = value < self.last
        self.total += value if reset else value - self.last
        self.resets += int(reset)
        self.last = value
        return reset
