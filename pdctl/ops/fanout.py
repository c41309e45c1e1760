"""`fan_out`: the one parallel loop over role instances or hosts.

Results come back labelled and in inventory order (prefill -> decode -> router), whatever finished first. One
policy for a host that cannot be asked: when the function raises UnreachableError or RefusedError (a host that does
not answer, an unknown host key), that item's `error` holds it and every other item's result stands; the caller
decides whether that stops the command (`raise_first_unreachable`) or shows as "unknown" -- never as "stopped".
Any other exception is a bug or a caller's own decision to stop, and propagates.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Generic, Sequence, TypeVar

from pdctl.errors import PdctlError, RefusedError, UnreachableError

T = TypeVar("T")
K = TypeVar("K")

MAX_PARALLEL = 8  # concurrent SSH sessions/HTTP probes per command: enough for a rack, gentle on a bastion


class DaemonPool:
    """At most `max_workers` daemon threads running submitted calls; `submit` returns a concurrent.futures
    Future. Leaving the `with` block on an exception (Ctrl-C, SIGTERM) cancels what has not started and returns at
    once: the calls still running (HTTP requests, remote commands, each bounded by its own timeout) are left to
    finish unseen, and the process may exit meanwhile. ThreadPoolExecutor would not allow that: its `with` waits
    for them, and its threads are joined at interpreter exit (threading._register_atexit), so an interrupted
    command would still wait for its slowest request. The calls never print; their outcome only reaches their
    Future."""

    def __init__(self, max_workers: int):
        self._max = max(1, max_workers)
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        fut: Future = Future()
        self._tasks.put((fut, fn, args))
        if len(self._threads) < self._max:
            th = threading.Thread(target=self._work, name="pdctl-pool", daemon=True)
            self._threads.append(th)
            th.start()
        return fut

    def _work(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            fut, fn, args = task
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args))
            except BaseException as e:  # reaches whoever waits on the future, never the screen
                fut.set_exception(e)

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        if cancel_futures:
            while True:
                try:
                    task = self._tasks.get_nowait()
                except queue.Empty:
                    break
                if task is not None:
                    task[0].cancel()
        for _ in self._threads:
            self._tasks.put(None)
        if wait:
            for th in self._threads:
                th.join()

    def __enter__(self) -> "DaemonPool":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # on an interrupt or an error: stop waiting now (the exception goes on unwinding)
        self.shutdown(wait=exc_type is None, cancel_futures=exc_type is not None)


@dataclass
class Labelled(Generic[K, T]):
    label: str  # e.g. "decode[0]@gpu2:30002" or a host name
    key: K  # what the function was called with: (role, index) or a host name
    value: T | None = None
    error: PdctlError | None = None  # the host could not be asked (UnreachableError / RefusedError)

    @property
    def reached(self) -> bool:
        return self.error is None


def fan_out(items: Sequence[tuple[str, K]], fn: Callable[[K], T], *, bound: int = MAX_PARALLEL) -> list[Labelled[K, T]]:
    """Call `fn(key)` for every (label, key), at most `bound` at once; labelled results in the order given."""
    if not items:
        return []

    def one(key: K) -> tuple[T | None, PdctlError | None]:
        try:
            return fn(key), None
        except (UnreachableError, RefusedError) as e:
            return None, e

    if len(items) == 1 and threading.current_thread() is not threading.main_thread():
        ((label, key),) = items  # already off the main thread (a final-health layer): no pool for one call
        return [Labelled(label, key, *one(key))]
    with DaemonPool(min(bound, len(items))) as ex:
        futs = [(label, key, ex.submit(one, key)) for label, key in items]
        out = []
        for label, key, f in futs:
            value, error = f.result()
            out.append(Labelled(label, key, value, error))
        return out


def raise_first_unreachable(results: Sequence[Labelled]) -> None:
    """Raise the first item's error (in inventory order), for commands that cannot go on without every host."""
    for r in results:
        if r.error is not None:
            raise r.error
