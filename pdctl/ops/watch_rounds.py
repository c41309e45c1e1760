"""`pdctl watch`'s rounds: one per cadence, each the round of the layer that owns the cadence (pdctl/ops/layers/,
checks/layers.py names the cadences). A round asks per target, so a host that does not answer makes ITS targets
unknown and the rest are still watched (final-health stops at such a host instead); it never raises for an
unhealthy or unreachable deployment, and returns what it saw for checks.watch_state to fold in.

`ROUNDS` and `Seen` stay importable from here (ops/watch.py, render, tests): a view of the layers' registry."""

from __future__ import annotations

from collections.abc import Callable

from pdctl.ops.context import Deployment
from pdctl.ops.layers import watch_rounds
from pdctl.ops.layers.seen import Seen, unreachable_hosts

#: cadence -> its round (a dict: a test may replace a round with monkeypatch.setitem)
ROUNDS: dict[str, Callable[[Deployment], Seen]] = watch_rounds()

__all__ = ["ROUNDS", "Seen", "unreachable_hosts"]
