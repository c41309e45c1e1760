"""The layers extension point's contract: what one final-health layer does, and the registry of them.

A layer is its metadata in checks/layers.py (name, title, what it gathers, optional, its watch cadence, whether
triage reads it) and one module in this package that calls `register(LayerDef(...))` under the same name:
- `start(g)` (a concurrent layer): called with the final-health pool open; it submits its reads to the pool
  (`g.submit_layer`, or `g.shared` for a read another layer needs too) without waiting, and returns the judge,
  which final-health calls once every layer started, in layer order, and which returns the layer's CheckResults;
- or `run(g)` (a sequential layer): called after the concurrent ones finished, in layer order (a window that our
  own probes would disturb, canaries that would show in it); the pool is shut by then, it reads on its own;
- `round(dep)`: for a layer that owns a watch cadence (its Layer names `every`): one watch round, per target, that
  never raises for an unhealthy or unreachable deployment and returns a Seen for checks.watch_state.
A layer raises only when a host cannot be asked (UnreachableError/RefusedError): final-health then stops (exit 3/4).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pdctl.checks.layers import LAYER_NAMES, layer
from pdctl.checks.result import CheckResult
from pdctl.ops.context import Deployment
from pdctl.ops.fanout import DaemonPool, Labelled, raise_first_unreachable
from pdctl.ops.layers.seen import Seen
from pdctl.role_ref import RoleRef

T = TypeVar("T")
#: label -> counter name -> value: the transfer counters recorded by `--record-baseline` (ops/baseline.py)
TransferBaseline = dict[str, dict[str, float]]
Judge = Callable[[], list[CheckResult]]


@dataclass
class Gathering:
    """One final-health run, as its layers see it: the deployment, the transfer baseline to compare with, the
    pool its reads run in, and the reads more than one layer needs, each started once."""

    dep: Deployment
    pool: DaemonPool
    baseline: TransferBaseline | None = None
    #: layer -> the future of its whole result, for the "still waiting for" line
    waiting: dict[str, Future[list[CheckResult]]] = field(default_factory=dict)
    _shared: dict[str, Future[Any]] = field(default_factory=dict)

    def submit_layer(self, name: str, fn: Callable[[Deployment], list[CheckResult]]) -> Judge:
        """Run `fn(dep)` in the pool as layer `name`'s whole work; the judge returns its result."""
        fut: Future[list[CheckResult]] = self.pool.submit(fn, self.dep)
        self.waiting[name] = fut
        return fut.result

    def shared(self, key: str, read: Callable[[], T]) -> Future[T]:
        """The future of `read()`, submitted the first time `key` is asked (the flags and lineage layers share one
        /proc read of every host)."""
        if key not in self._shared:
            self._shared[key] = self.pool.submit(read)
        return self._shared[key]


@dataclass(frozen=True)
class LayerDef:
    """What a layer does (module docstring: the contract). Exactly one of `start` and `run`."""

    name: str  # its checks.layers.Layer name
    start: Callable[[Gathering], Judge] | None = None
    run: Callable[[Gathering], list[CheckResult]] | None = None
    round: Callable[[Deployment], Seen] | None = None

    def __post_init__(self) -> None:
        if self.name not in LAYER_NAMES:
            raise ValueError(f"layer {self.name!r} has no entry in checks/layers.py")
        if (self.start is None) == (self.run is None):
            raise ValueError(f"layer {self.name!r}: give exactly one of start (concurrent) and run (sequential)")
        if (self.round is not None) != (layer(self.name).every is not None):
            raise ValueError(
                f"layer {self.name!r}: a watch round goes with a cadence of its own (Layer.every in checks/layers.py)"
            )


#: name -> LayerDef, as registered (pdctl.ops.layers gives them in layer order)
REGISTRY: dict[str, LayerDef] = {}


def register(definition: LayerDef) -> LayerDef:
    """Add a layer's definition. Raises ValueError when a module registers a name another already did."""
    if definition.name in REGISTRY:
        raise ValueError(f"layer {definition.name!r} registered twice")
    REGISTRY[definition.name] = definition
    return definition


def labelled(results: list[Labelled[RoleRef, list[CheckResult]]]) -> list[CheckResult]:
    """The checks of every instance, each targeted at its instance's label, in inventory order. A host that could
    not be asked stops final-health (exit 3/4): its probes say nothing about the deployment."""
    raise_first_unreachable(results)
    out = []
    for r in results:
        for check in r.value or []:
            check.target = r.label
            out.append(check)
    return out
