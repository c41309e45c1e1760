"""The KV transfer backends the engine offers, by their --disaggregation-transfer-backend name: the one list the
launch flag's choices and the build read. A backend lives in its own module, which defines
`create(ctx: BackendContext) -> TransferBackend` (transfer_backend.py); it is imported only when chosen, so its
native package loads only in a process that uses it (and never in the HTTP process)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from engine.disaggregation.transfer_backend import BackendContext, TransferBackend

DEFAULT = "mooncake"  # SGLang's default, so its own minimal PD launch line (no backend flag) runs


@dataclass(frozen=True)
class BackendKind:
    name: str  # the flag's value, as SGLang spells it
    module: str  # defines create(ctx)
    package: str | None  # the native package it needs installed (None: pure Python)
    reads: tuple[str, ...]  # the BackendContext fields its factory uses
    moves_kv: bool  # False: nothing crosses, the decode recomputes the prompt itself (the fake)
    summary: str  # one line for --help and the docs

    def create(self, ctx: BackendContext) -> TransferBackend:
        """Import the backend's module and build it. OSError when it cannot run here (its package is missing, its
        engine does not start): launch_server turns that into `cannot start: ...`, exit 1."""
        try:
            mod = importlib.import_module(self.module)
        except ImportError as e:  # the wheel, or a native library it loads, is missing
            raise OSError(f"the {self.name} transfer backend is unavailable: {e}") from None
        factory: Callable[[BackendContext], TransferBackend] = mod.create
        return factory(ctx)


BACKENDS: dict[str, BackendKind] = {}


def register(kind: BackendKind) -> None:
    if kind.name in BACKENDS:
        raise ValueError(f"transfer backend {kind.name!r} registered twice")
    BACKENDS[kind.name] = kind


def names() -> list[str]:
    return list(BACKENDS)


def kind(name: str) -> BackendKind:
    return BACKENDS[name]


register(
    BackendKind(
        name="mooncake",
        module="engine.disaggregation.mooncake_backend",
        package="mooncake",  # its TransferEngine loads libibverbs1; notifications need pyzmq
        reads=("pool", "listen_host", "advertised_host", "ib_device", "metrics_registry"),
        moves_kv=True,
        summary="Mooncake's TransferEngine, DRAM to DRAM (RDMA, else TCP); notifications over ZMQ",
    )
)
register(
    BackendKind(
        name="nixl",
        module="engine.disaggregation.nixl_backend",
        package="nixl_cu12",
        reads=("pool", "agent_name"),
        moves_kv=True,
        summary="NIXL over UCX, DRAM to DRAM; notifications are NIXL's",
    )
)
register(
    BackendKind(
        name="fake",
        module="engine.disaggregation.fake_backend",
        package=None,
        reads=("pool", "agent_name"),
        moves_kv=False,
        summary="moves nothing and always succeeds; the decode recomputes the prompt (scheduling tests)",
    )
)
