"""The router kinds pdctl drives: a small registry, one module per kind (sglang_router.py, smg.py).

A kind says what pdctl launches (`python -m <module>`), how its process shows in /proc (it rewrites its title, so
its argv is not readable there), which package's metadata gives its version and which parser lint asks, how its
worker API behaves (`POST /workers` for a listed URL, a deleted worker's `draining` state), how long it takes to
stop, and what it exposes (worker status in `GET /workers`, a circuit-breaker gauge on its metrics port).

Where a new kind goes: one module here that calls `register(RouterKind(...))`, imported below; nothing else
changes (the inventory's `kind`, launch, lint, the worker API and the router checks read the registry).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_METRICS_PORT = 29000  # both kinds' --prometheus-port default


@dataclass(frozen=True)
class RouterKind:
    name: str  # the inventory's `kind` on a router entry
    module: str  # launched as `python -m <module>`
    package: str  # the import package its parser lives in (<package>.launch_router, .router_args)
    dist: str  # the distribution whose metadata gives its version
    title: str  # its process title once started (/proc/PID/cmdline shows only this)
    stop_grace_s: float  # how long a SIGTERM may take before it is killed
    readd_conflict: bool  # POST /workers for a URL still listed answers 409 (else it replaces it)
    delete_drains: bool  # a deleted worker stays listed as `draining` for a few seconds
    breaker_metric: str | None  # the gauge of each worker's circuit breaker (0 closed, 1 open, 2 half-open)
    lists_status: bool  # GET /workers carries `status` (ready / not_ready / draining / pending)


_KINDS: dict[str, RouterKind] = {}


def register(kind: RouterKind) -> RouterKind:
    """Add a router kind to the registry (each kind's module calls it once)."""
    _KINDS[kind.name] = kind
    return kind


def router_kinds() -> dict[str, RouterKind]:
    """name -> RouterKind of every registered kind."""
    return dict(_KINDS)


def router_kind(name: str) -> RouterKind:
    """The registered kind called `name`; KeyError for an unknown one (the inventory refuses it first)."""
    return _KINDS[name]


def kind_of_module(module: str) -> RouterKind | None:
    """The kind launched as `python -m module`, or None."""
    return next((k for k in _KINDS.values() if k.module == module), None)


from pdctl.routers import sglang_router, smg  # noqa: E402,F401  (each registers its kind)

#: what a router entry without `kind` runs: smg, the maintained gateway a new deployment installs
DEFAULT_ROUTER_KIND: str = smg.KIND.name
