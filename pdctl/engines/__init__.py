"""The serving engines pdctl deploys and judges: a small registry, one module per kind (bundled.py, sglang.py).

A kind says what pdctl launches (`python -m <module>`) and what its judges may assume of it: how a failed KV
transfer shows in a completion, and which restart hazards are known for it, per transfer backend and how sure that
knowledge is. Where a new kind goes: one module here that calls `register(EngineKind(...))`, imported below, and
its name in the inventory's `engine` field.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class HazardKnowledge:
    """What is known of the degraded-bootstrap hazard (a decode restarted alone under a running prefill) for one
    engine and transfer backend: `known` it fails (the seed's NIXL), or only `possible` (not reproduced here)."""

    known: bool
    evidence: str


@dataclass(frozen=True)
class EngineKind:
    name: str  # the inventory's `engine`
    module: str  # launched as `python -m <module>`
    repeats_token_on_failed_transfer: bool  # a failed transfer answers 200 with one token repeated
    decode_alone_hazard: dict[str, HazardKnowledge] = field(default_factory=dict)  # backend -> knowledge
    default_hazard: HazardKnowledge = HazardKnowledge(True, "the seed's degraded bootstrap")

    def hazard(self, backend: str) -> HazardKnowledge:
        """What is known of a decode restarted alone, for this engine over `backend`."""
        return self.decode_alone_hazard.get(backend, self.default_hazard)


_KINDS: dict[str, EngineKind] = {}


def register(kind: EngineKind) -> EngineKind:
    """Add an engine kind to the registry (each kind's module calls it once)."""
    _KINDS[kind.name] = kind
    return kind


def engine_kind(name: str) -> EngineKind:
    """The registered engine called `name` (the inventory refuses an unknown one first)."""
    return _KINDS[name]


def engine_kinds() -> dict[str, EngineKind]:
    return dict(_KINDS)


from pdctl.engines import bundled, sglang  # noqa: E402,F401  (each registers its kind)
