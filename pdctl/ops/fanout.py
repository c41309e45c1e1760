"""`fan_out`: the one parallel loop over role instances or hosts.

Results come back labelled and in inventory order (prefill -> decode -> router), whatever finished first. One
policy for a host that cannot be asked: when the function raises UnreachableError or RefusedError (a host that does
not answer, an unknown host key), that item's `error` holds it and every other item's result stands; the caller
decides whether that stops the command (`raise_first_unreachable`) or shows as "unknown" -- never as "stopped".
Any other exception is a bug or a caller's own decision to stop, and propagates.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Generic, Sequence, TypeVar

from pdctl.errors import PdctlError, RefusedError, UnreachableError

T = TypeVar("T")
K = TypeVar("K")

MAX_PARALLEL = 8   # concurrent SSH sessions/HTTP probes per command: enough for a rack, gentle on a bastion


@dataclass
class Labelled(Generic[K, T]):
    label: str                         # e.g. "decode[0]@gpu2:30002" or a host name
    key: K                             # what the function was called with: (role, index) or a host name
    value: T | None = None
    error: PdctlError | None = None    # the host could not be asked (UnreachableError / RefusedError)

    @property
    def reached(self) -> bool:
        return self.error is None


def fan_out(items: Sequence[tuple[str, K]], fn: Callable[[K], T], *, bound: int = MAX_PARALLEL
            ) -> list[Labelled[K, T]]:
    """Call `fn(key)` for every (label, key), at most `bound` at once; labelled results in the order given."""
    if not items:
        return []

    def one(key: K) -> tuple[T | None, PdctlError | None]:
        try:
            return fn(key), None
        except (UnreachableError, RefusedError) as e:
            return None, e

    with ThreadPoolExecutor(max_workers=max(1, min(bound, len(items)))) as ex:
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
