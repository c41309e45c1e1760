"""The e2e layer: one chat completion through each router, its content checked (a failed KV transfer that
answers 200 with one token repeated is caught where that is how the engine fails)."""

from __future__ import annotations

from pdctl.checks.result import CheckResult
from pdctl.engines import engine_kind
from pdctl.ops.context import Deployment
from pdctl.ops.layers.base import Gathering, Judge, LayerDef, labelled, register
from pdctl.ops.layers.seen import Seen, per_instance


def e2e_probe(dep: Deployment, role: str, i: int) -> list[CheckResult]:
    """The inventory's probe through router `i`."""
    from pdctl.checks.e2e import probe_chat

    p = dep.inv.final_health.probe
    return [
        probe_chat(
            dep.base_url(role, i),
            model=p.model or dep.inv.served_model_name,
            prompt=p.prompt,
            max_tokens=p.max_tokens,
            timeout=p.timeout,
            repeats_on_failure=engine_kind(dep.inv.engine).repeats_token_on_failed_transfer,
        )
    ]


def e2e_layer(dep: Deployment) -> list[CheckResult]:
    return labelled(dep.each_instance(lambda role, i: e2e_probe(dep, role, i), roles=("router",)))


def _start(g: Gathering) -> Judge:
    return g.submit_layer("e2e", e2e_layer)


def e2e_round(dep: Deployment) -> Seen:
    """The watch's e2e round: the same probe through each router, per target (the tokens its canaries made
    counted apart, pdctl_canary_generated_tokens_total)."""
    seen = per_instance(dep, lambda role, i: e2e_probe(dep, role, i), roles=("router",))
    seen.canary_tokens = sum(canary_tokens(c) for c in seen.checks)
    return seen


def canary_tokens(result: CheckResult) -> int:
    """The completion tokens a chat canary's answer says were generated (0 when it did not say). Pure."""
    usage = result.data.get("usage") if isinstance(result.data, dict) else None
    n = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return n if isinstance(n, int) else 0


register(LayerDef("e2e", start=_start, round=e2e_round))
