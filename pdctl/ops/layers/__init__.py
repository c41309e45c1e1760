"""The final-health layers' gathering and judging, one module per layer, each registering a LayerDef (base.py
holds the contract). Every module of this package is imported below, so a layer is its entry in checks/layers.py
(the metadata render, the CLI and the playbook schema read) plus one module here; final-health
(ops/verify.py) and the watch's rounds (ops/watch_rounds.py) read the registry.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

from pdctl.checks.layers import LAYER_NAMES
from pdctl.ops.context import Deployment
from pdctl.ops.layers.base import REGISTRY, LayerDef
from pdctl.ops.layers.seen import Seen

_SHARED = {"base", "seen"}  # the contract and the rounds' helpers, not layers
for _module in pkgutil.iter_modules(__path__):
    if _module.name not in _SHARED:
        importlib.import_module(f"{__name__}.{_module.name}")

_missing = [name for name in LAYER_NAMES if name not in REGISTRY]
if _missing:
    raise ImportError(f"layer(s) {', '.join(_missing)} in checks/layers.py have no module in pdctl/ops/layers/")

#: every layer's definition, in the layers' order (checks/layers.py)
LAYER_DEFS: tuple[LayerDef, ...] = tuple(REGISTRY[name] for name in LAYER_NAMES)


def watch_rounds() -> dict[str, Callable[[Deployment], Seen]]:
    """cadence -> its round, for the layers that own one, in the layers' order (checks.watch_schedule.CADENCES)."""
    return {d.name: d.round for d in LAYER_DEFS if d.round is not None}


__all__ = ["LAYER_DEFS", "REGISTRY", "LayerDef", "watch_rounds"]
