"""`pdctl triage`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pdctl.cli.common import (
    FINAL_HEALTH_STEP,
    InventoryOpt,
    JsonOpt,
    ReportOpt,
    handle_errors,
    open_deployment,
    progress_quiet,
)
from pdctl.cli.inflight import check_window
from pdctl.ops.defaults import TRIAGE_INTERVAL_S, TRIAGE_WINDOW_S
from pdctl.serialize import to_data


@handle_errors
def triage(
    inventory: InventoryOpt = None,
    window: Annotated[
        float, typer.Option("--window", help="Seconds to sample queues and counters over.")
    ] = TRIAGE_WINDOW_S,
    interval: Annotated[
        Optional[float],
        typer.Option(
            "--interval", help=f"Seconds between samples (default {TRIAGE_INTERVAL_S:g}, or the window when shorter)."
        ),
    ] = None,
    json_out: JsonOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List every observation, passing ones too.")] = False,
    report: ReportOpt = None,
    outputs: Annotated[
        bool,
        typer.Option(
            "--outputs",
            help="Also run `pdctl verify outputs` (load: 30 sessions at concurrency 30) and name corruption "
            "under concurrency or a PD that is not PD.",
        ),
    ] = False,
) -> None:
    """Diagnose a stall: findings (observed vs inferred) and the action to take.

    Reads the service status and health of every role, an end-to-end probe, the inflight verdict,
    decode idle (throughput, GPU utilisation), transfer/bootstrap failures and restart lineage.

    Exit 0 healthy, 1 a finding needs action (stopped roles and unreadable metrics included),
    3 a host could not be reached, 4 refused (host key), 130 interrupted."""
    from pdctl import render
    from pdctl.ops.triage import triage as run

    interval = check_window(window, interval, TRIAGE_INTERVAL_S)
    with open_deployment(inventory, quiet=progress_quiet(json_out), reported=FINAL_HEALTH_STEP) as dep:
        rep = run(dep, window_s=window, interval_s=interval, outputs=outputs)
    if json_out:
        render.emit_json(to_data(rep))
    else:
        render.triage_report(rep, verbose=verbose)
    code = rep.exit_code()
    if code:
        raise typer.Exit(code)
