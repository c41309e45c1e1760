"""`poll_until`: the one wait loop. Every wait polls an observation often, never sleeps a fixed time, and ends by
its own named timeout, so the caller can say which limit expired."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


@dataclass
class Waited(Generic[T]):
    ok: bool  # the predicate held before the timeout
    value: T  # the last observation (the satisfying one when ok)
    elapsed: float  # seconds waited
    expired: str | None  # the name of the timeout that expired; None when ok
    limit: float  # that timeout's length in seconds


def poll_until(
    observe: Callable[[], T],
    done: Callable[[T], bool],
    *,
    timeout: float,
    interval: float,
    timeout_name: str = "timeout",
    on_wait: Callable[[T, float, float], None] | None = None,
    backoff: float = 1.0,
    max_interval: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Waited[T]:
    """Call `observe()` until `done(value)` holds or `timeout` seconds pass, sleeping `interval` between tries (never
    past the deadline). The first observation is made at once, and one is always made at the deadline, so a wait of
    0 s still looks once. `on_wait(value, elapsed, timeout)` is called after each unsatisfied observation (progress,
    or a raise to stop early, e.g. when the awaited process died). `backoff` > 1 grows the interval after each try,
    up to `max_interval` (quick first looks, fewer later ones). Never raises on timeout: the result names which
    timeout expired. Exceptions from `observe`, `done` and `on_wait` propagate."""
    start = clock()
    while True:
        value = observe()
        elapsed = clock() - start
        if done(value):
            return Waited(True, value, elapsed, None, timeout)
        if elapsed >= timeout:
            return Waited(False, value, elapsed, timeout_name, timeout)
        if on_wait is not None:
            on_wait(value, elapsed, timeout)
        sleep(max(0.0, min(interval, timeout - (clock() - start))))
        interval = min(interval * backoff, max_interval if max_interval is not None else interval * backoff)
