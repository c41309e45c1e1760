"""`action: verify`: final-health, all layers or the ones named."""

from __future__ import annotations

from typing import Optional

from pdctl.checks.layers import DEFAULT_LAYERS, LAYER_NAMES
from pdctl.playbook.kinds import register
from pdctl.playbook.outcome import Args, RunContext, StepOutcome
from pdctl.playbook.steps import health_exit_code, health_outcome
from pdctl.serialize import to_data
from pdctl.struct_errors import field_error


class VerifyArgs(Args):
    layers: Optional[list[str]] = None  # names of checks/layers.py (its one list), checked below
    since_baseline: bool = False  # transfer layer: fail only if failures grew since the recorded baseline
    record_baseline: bool = False  # record the current failure counters as the baseline first

    def __post_init__(self) -> None:
        for i, name in enumerate(self.layers or ()):
            if name not in LAYER_NAMES:
                raise field_error(f"layers.{i}", f"unknown layer {name!r} (choose from {', '.join(LAYER_NAMES)})")


def describe(a: VerifyArgs) -> str:
    # one `--layer X` per layer: the form every pdctl version accepts (older ones refuse a comma list)
    return (
        "verify final-health"
        + ("".join(f" --layer {n}" for n in a.layers) if a.layers else " (all layers)")
        + (" --record-baseline" if a.record_baseline else "")
        + (" --since-baseline" if a.since_baseline else "")
    )


@register(
    "verify",
    args=VerifyArgs,
    gate_keys=("ok", "layers_pass"),
    mutating=False,
    describe=describe,
    summary="final-health, all layers or the ones named",
    order=10,
)
def run(ctx: RunContext, a: VerifyArgs) -> StepOutcome:
    from pdctl.ops import verify

    layers = tuple(a.layers) if a.layers else DEFAULT_LAYERS
    report = verify.final_health_with_baseline(
        ctx.dep, since_baseline=a.since_baseline, record=a.record_baseline, layers=layers
    )
    ok, per_layer, summary = health_outcome(report)
    return StepOutcome(
        ok,
        summary,
        exit_code=health_exit_code(report),
        layers=per_layer,
        health=report,
        data={"final_health": to_data(report)},
    )
