"""The final-health layers: the one list of their names, titles, order and what each gathers.

The CLI's `--layer` parsing, ops (which layers to run), the playbook schema (which layers a verify step may name)
and render (each table's title) all read this list, so a new layer is added here once.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layer:
    name: str  # the key in HealthReport.layers, `--layer NAME`, a playbook's `layers: [NAME]`
    title: str  # the heading of its table
    gathers: str  # what it reads, for docs and --help
    optional: bool = False  # run only when named (it samples over a window, or loads every pair)


LAYERS: tuple[Layer, ...] = (
    Layer("health", "component health", "GET /health of every role; the router's /readiness with every worker"),
    Layer("e2e", "end-to-end probe through the router", "a chat completion through each router, content checked"),
    Layer("transfer", "KV transfer failures", "transfer_failed / bootstrap_failed counters of every worker"),
    Layer("flags", "live flags and env vs inventory", "cmdline and env of each main process, from /proc"),
    Layer("lineage", "restart lineage", "pids and start times against the last co-restart record; systemd NRestarts"),
    Layer(
        "inflight", "inflight queues", "the PD queue gauges and decode progress sampled over a window", optional=True
    ),
    Layer(
        "pairs",
        "prefill x decode pair canaries",
        "a canary straight to every prefill x decode pair, as the router sends one, content checked",
        optional=True,
    ),
)

#: every layer name, in order
LAYER_NAMES: tuple[str, ...] = tuple(layer.name for layer in LAYERS)
#: what final-health runs when no layer is named
DEFAULT_LAYERS: tuple[str, ...] = tuple(layer.name for layer in LAYERS if not layer.optional)
OPTIONAL_LAYERS: tuple[str, ...] = tuple(layer.name for layer in LAYERS if layer.optional)

_BY_NAME = {layer.name: layer for layer in LAYERS}


def layer_title(name: str) -> str:
    """'3. KV transfer failures' for 'transfer'; an unknown name is its own title. Pure."""
    if name not in _BY_NAME:
        return name
    return f"{LAYER_NAMES.index(name) + 1}. {_BY_NAME[name].title}"


def parse_layer_names(items: list[str] | None) -> tuple[str, ...]:
    """`--layer` values (repeated and/or comma-separated) as layer names in the order given; None or an empty list
    means the default layers. Pure. Raises ValueError naming the first unknown layer, or saying none was named."""
    if items is None:
        return DEFAULT_LAYERS
    names = tuple(name.strip() for item in items for name in item.split(",") if name.strip())
    if not names:
        raise ValueError(f"no layer named (choose from {', '.join(LAYER_NAMES)})")
    bad = [name for name in names if name not in _BY_NAME]
    if bad:
        raise ValueError(f"{bad[0]!r}: unknown layer (choose from {', '.join(LAYER_NAMES)})")
    return names


def in_order(names) -> list[str]:
    """The given layer names sorted in the layers' order (unknown names last, as given). Pure."""
    order = {n: i for i, n in enumerate(LAYER_NAMES)}
    return sorted(names, key=lambda n: order.get(n, len(order)))
