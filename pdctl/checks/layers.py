"""The final-health layers' metadata: the one list of their names, titles, order, what each gathers, which watch
cadence judges each and which triage reads.

Pure data, so the CLI's `--layer` parsing, the playbook schema, render (each table's title), the watch's schedule
(checks/watch_schedule.py) and triage's judge read it without importing ops. What a layer does (its final-health
gathering and judging, its watch round) is its module in pdctl/ops/layers/, registered under the same name: a new
layer is one `Layer(...)` entry here and one module there (tests/unit/test_layer_registry.py holds the two together).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Layer:
    name: str  # the key in HealthReport.layers, `--layer NAME`, a playbook's `layers: [NAME]`
    title: str  # the heading of its table
    gathers: str  # what it reads, for docs and --help
    optional: bool = False  # run only when named (it samples over a window, or loads every pair)
    # the watch cadence whose round judges this layer (None: not watched); a cadence is named after the layer
    # whose module owns its round, and that layer names the WatchSettings field holding its period in `every`
    cadence: str | None = None
    every: str | None = None  # WatchSettings field: seconds between rounds of the cadence this layer owns
    triage: bool = False  # read by `pdctl triage` from its final-health run (checks.triage.FINAL_HEALTH_LAYERS)


LAYERS: tuple[Layer, ...] = (
    Layer(
        "health",
        "component health",
        "GET /health of every role; the router's /readiness with every worker",
        cadence="health",
        every="health_every",
        triage=True,
    ),
    Layer(
        "e2e",
        "end-to-end probe through the router",
        "a chat completion through each router, content checked",
        cadence="e2e",
        every="e2e_every",
        triage=True,
    ),
    # the watch reads the failure counters in every inflight sample, so its inflight round judges them
    Layer(
        "transfer",
        "KV transfer failures",
        "transfer_failed / bootstrap_failed counters of every worker",
        cadence="inflight",
        triage=True,
    ),
    Layer(
        "flags",
        "live flags and env vs inventory",
        "cmdline and env of each main process, from /proc",
        cadence="flags",
        every="flags_every",
    ),
    # judged from the same /proc read as flags: one round for both
    Layer(
        "lineage",
        "restart lineage",
        "pids and start times against the last co-restart record; systemd NRestarts",
        cadence="flags",
        triage=True,
    ),
    Layer(
        "inflight",
        "inflight queues",
        "the PD queue gauges and decode progress sampled over a window",
        optional=True,
        cadence="inflight",
        every="inflight_interval",
    ),
    Layer(
        "pairs",
        "prefill x decode pair canaries",
        "a canary straight to every prefill x decode pair, as the router sends one, content checked",
        optional=True,
        cadence="pairs",
        every="pairs_every",
        # triage's direct evidence past the router: a canary answered with a failure in milliseconds is a transfer
        # failing fast (a lone restart), one that hangs is a held room (the update_status race)
        triage=True,
    ),
    # not watched: 30 sessions at concurrency 30 is load, not a probe (`pdctl verify outputs` on demand)
    Layer(
        "outputs",
        "outputs agree",
        "greedy sessions at concurrency 1 and 30 and through every pair, compared token for token; PD used",
        optional=True,
    ),
)

#: every layer name, in order
LAYER_NAMES: tuple[str, ...] = tuple(layer.name for layer in LAYERS)
#: what final-health runs when no layer is named
DEFAULT_LAYERS: tuple[str, ...] = tuple(layer.name for layer in LAYERS if not layer.optional)
OPTIONAL_LAYERS: tuple[str, ...] = tuple(layer.name for layer in LAYERS if layer.optional)
#: the watch's cadences: the layers that own a round, in layer order
WATCH_CADENCES: tuple[str, ...] = tuple(layer.name for layer in LAYERS if layer.every is not None)
#: the layers `pdctl triage` reads from its final-health run
TRIAGE_LAYERS: tuple[str, ...] = tuple(layer.name for layer in LAYERS if layer.triage)

_BY_NAME = {layer.name: layer for layer in LAYERS}


def layer(name: str) -> Layer:
    """The layer named `name`. Raises KeyError for an unknown name."""
    return _BY_NAME[name]


def layers_judged_in(cadence: str) -> tuple[str, ...]:
    """The layers a watch cadence's round judges ('flags' -> ('flags', 'lineage')). Pure."""
    return tuple(layer.name for layer in LAYERS if layer.cadence == cadence)


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


def in_order(names: Iterable[str]) -> list[str]:
    """The given layer names sorted in the layers' order (unknown names last, as given). Pure."""
    order = {n: i for i, n in enumerate(LAYER_NAMES)}
    return sorted(names, key=lambda n: order.get(n, len(order)))
