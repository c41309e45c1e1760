"""`pdctl verify inflight`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pdctl.cli.common import InventoryOpt, JsonOpt, ReportOpt, handle_errors, open_deployment, progress_quiet
from pdctl.ops.defaults import INFLIGHT_INTERVAL_S, INFLIGHT_WINDOW_S
from pdctl.serialize import to_data


MAX_WINDOW_S = 86400.0  # a day: longer is a typo, and inf/nan would overflow the sample count


def check_window(window: float, interval: float | None, default_interval: float) -> float:
    """Validate a sampling window and interval (`verify inflight`, `triage`) before anything is read; returns the
    interval (not given: the default, or the window when that is shorter). Raises UsageError (exit 2) naming the
    option: each finite, > 0 and at most a day, --interval at most --window."""
    import math

    from pdctl.errors import UsageError

    if interval is None:  # `--window 2` alone must not be refused for an --interval the operator never gave
        interval = min(default_interval, window) if math.isfinite(window) and window > 0 else default_interval
    for name, v in (("--window", window), ("--interval", interval)):
        if not math.isfinite(v) or not 0 < v <= MAX_WINDOW_S:
            raise UsageError(f"{name} {v:g}: must be a number of seconds > 0 and at most {MAX_WINDOW_S:g}")
    if interval > window:
        raise UsageError(f"--interval {interval:g} must be at most --window {window:g}")
    return interval


@handle_errors
def inflight(
    inventory: InventoryOpt = None,
    window: Annotated[float, typer.Option("--window", help="Seconds to sample over.")] = INFLIGHT_WINDOW_S,
    interval: Annotated[
        Optional[float],
        typer.Option(
            "--interval", help=f"Seconds between samples (default {INFLIGHT_INTERVAL_S:g}, or the window when shorter)."
        ),
    ] = None,
    json_out: JsonOpt = False,
    report: ReportOpt = None,
) -> None:
    """Check whether requests are stuck in the PD queues (drained, busy or pinned).

    Samples the PD queue gauges and decode progress over a window:
    drained (exit 0), busy (0, a warning: work is moving) or pinned (1: nonzero with no progress
    for the whole window; or, while traffic flows, a room the prefill alone held for 30 s, by the
    cross-side room balance). A shorter window that ends busy but looks pinned samples on to 30 s.
    Ctrl-C judges what was gathered (130).

    Unknown (3) when a worker could not be read in any sample."""
    from pdctl import render
    from pdctl.ops.inflight import sample_inflight

    interval = check_window(window, interval, INFLIGHT_INTERVAL_S)
    with open_deployment(inventory, quiet=progress_quiet(json_out)) as dep:
        rep = sample_inflight(dep, window, interval, preflight=True)  # exit 3 before a window when nothing answers
    if json_out:
        render.emit_json(to_data(rep))
    else:
        render.inflight_report(rep)
    code = rep.exit_code()
    if code:
        raise typer.Exit(code)
