"""The step kinds a playbook can use, one module per kind, each registering itself (as mini-sglang's
`kvcache/__init__.py` registers its cache managers).

A kind is an argument type (an `Args` Struct: msgspec, as the inventory) and a run function decorated with
`register`:

    class PingArgs(Args):
        host: str

    @register("ping", args=PingArgs, gate_keys=("ok",), mutating=False, summary="one ICMP echo")
    def run(ctx: RunContext, a: PingArgs) -> StepOutcome:
        ...

Every module of this package is imported below, so a new kind is one new file here. Kinds call the ops library
(`pdctl.ops.*`, imported inside their functions, so loading a playbook stays cheap) and never print.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable, Optional, TypeVar

from pdctl.playbook.outcome import ArgProblems, RawArgs, RunContext, StepKind, StepOutcome
from pdctl.playbook.steps import describe_args
from pdctl.playbook.vars import Scope

#: name -> StepKind, in listing order (`order`, then name)
REGISTRY: dict[str, StepKind[Any]] = {}

A = TypeVar("A")


def register(
    name: str,
    *,
    args: type[A],
    gate_keys: tuple[str, ...],
    mutating: bool,
    summary: str,
    describe: Optional[Callable[[A], str]] = None,
    check: Optional[Callable[[RawArgs, bool], ArgProblems]] = None,
    fill: Optional[Callable[[RawArgs, Scope], RawArgs]] = None,
    order: int = 100,
    verdicts: tuple[str, ...] = (),
) -> Callable[[Callable[[RunContext, A], StepOutcome]], Callable[[RunContext, A], StepOutcome]]:
    """Decorate a kind's run function: adds StepKind `name` to REGISTRY and returns the function unchanged. The
    parameters are StepKind's fields (outcome.py); `describe` defaults to `NAME k=v ...` of the args given. Raises
    ValueError if a kind of another module has the name."""

    def add(run: Callable[[RunContext, A], StepOutcome]) -> Callable[[RunContext, A], StepOutcome]:
        old = REGISTRY.get(name)
        if old is not None and old.run.__module__ != run.__module__:
            raise ValueError(f"step kind {name!r} registered twice ({old.run.__module__}, {run.__module__})")
        REGISTRY[name] = StepKind(
            name,
            args,
            tuple(gate_keys),
            mutating,
            run,
            describe or (lambda a: describe_args(name, a)),
            summary,
            check,
            fill,
            order,
            tuple(verdicts),
        )
        return run

    return add


def _import_all() -> None:
    """Import every module of this package (each registers its kind), then put REGISTRY in listing order."""
    for mod in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{mod.name}")
    ordered = sorted(REGISTRY.values(), key=lambda k: (k.order, k.name))
    REGISTRY.clear()
    REGISTRY.update((k.name, k) for k in ordered)


_import_all()
