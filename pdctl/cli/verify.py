"""`pdctl verify ...`: read-only checks."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pdctl.cli import inflight as inflight_cmd
from pdctl.cli.common import InventoryOpt, JsonOpt, handle_errors, open_deployment

app = typer.Typer(help="Read-only checks of a deployment.", no_args_is_help=True)
app.command("inflight")(inflight_cmd.inflight)


@app.command("final-health")
@handle_errors
def final_health(
    inventory: InventoryOpt = None,
    json_out: JsonOpt = False,
    layer: Annotated[Optional[list[str]], typer.Option(
        "--layer", help="Run only these layers (repeat, or comma-separate): health, e2e, transfer, flags, lineage; "
                   "inflight (a sampled window) only when named.")] = None,
    record_baseline: Annotated[bool, typer.Option(
        "--record-baseline", help="Save the current transfer/bootstrap failure counters as the baseline.")] = False,
    since_baseline: Annotated[bool, typer.Option(
        "--since-baseline", help="Transfer layer: fail only if failures grew since the recorded baseline.")] = False,
) -> None:
    """The seed's closing check: health, an end-to-end probe, transfer failures, live flags/env, restart lineage."""
    from pdctl import render
    from pdctl.errors import UsageError
    from pdctl.ops.verify import LAYERS, OPTIONAL_LAYERS, final_health_with_baseline

    layers = tuple(name.strip() for item in layer for name in item.split(",") if name.strip()) if layer else LAYERS
    if layer is not None and not layers:
        raise UsageError("--layer: no layer named (choose from health, e2e, transfer, flags, lineage, inflight)")
    known = LAYERS + OPTIONAL_LAYERS
    bad = [name for name in layers if name not in known]
    if bad:
        raise UsageError(f"--layer {bad[0]!r}: unknown layer (choose from {', '.join(known)})")
    with open_deployment(inventory, quiet=json_out) as dep:
        report = final_health_with_baseline(dep, since_baseline=since_baseline, record=record_baseline, layers=layers)
    if json_out:
        render.emit_json(report.to_dict())
    else:
        render.health_report(report)
    if not report.ok:
        raise typer.Exit(1)
