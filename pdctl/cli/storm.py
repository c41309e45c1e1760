"""`pdctl storm`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pdctl.cli import complete_values
from pdctl.cli.common import InventoryOpt, JsonOpt, ReportOpt, handle_errors, open_deployment, progress_quiet
from pdctl.ops import defaults as D
from pdctl.serialize import to_data


@handle_errors
def storm(
    inventory: InventoryOpt = None,
    requests: Annotated[int, typer.Option("--requests", help="Storm requests (the seed: 90).")] = D.SEED_REQUESTS,
    prompt_tokens: Annotated[
        int, typer.Option("--prompt-tokens", help="Prompt length in tokens.")
    ] = D.SEED_PROMPT_TOKENS,
    abort_min: Annotated[
        float, typer.Option("--abort-min", help="Random target: earliest abort, s after send.")
    ] = D.SEED_ABORT_MIN_S,
    abort_max: Annotated[
        float, typer.Option("--abort-max", help="Random target: latest abort, s after send.")
    ] = D.SEED_ABORT_MAX_S,
    sample_every: Annotated[
        float,
        typer.Option(
            "--sample-every",
            "--interval",
            help="Seconds between /metrics samples (--interval: the same name as in verify inflight and triage).",
        ),
    ] = D.SEED_SAMPLE_EVERY_S,
    watch: Annotated[
        float,
        typer.Option(
            "--watch",
            "--window",
            help="Seconds to watch inflight after the load stops (--window: the same "
            "name as in verify inflight and triage).",
        ),
    ] = D.SEED_WATCH_S,
    target: Annotated[
        str,
        typer.Option(
            "--target",
            autocompletion=complete_values.complete_target,
            help="random (the seed's storm) or transfer-window (aimed).",
        ),
    ] = D.STORM_TARGET,
    calibrate: Annotated[
        int,
        typer.Option(
            "--calibrate", help="Lone calibration requests before the storm (0: none; transfer-window needs >= 1)."
        ),
    ] = D.STORM_CALIBRATE,
    spacing: Annotated[
        Optional[float],
        typer.Option(
            "--spacing",
            help="Seconds between launches (default: 0 for random, the calibrated service time for transfer-window).",
        ),
    ] = None,
    aim_from: Annotated[
        float,
        typer.Option(
            "--aim-from", help="transfer-window: earliest abort, as a fraction of the calibrated time to first token."
        ),
    ] = 0.6,
    aim_to: Annotated[
        float,
        typer.Option(
            "--aim-to", help="transfer-window: latest abort, as a fraction of the calibrated time to first token."
        ),
    ] = 0.9,
    max_new_tokens: Annotated[
        int, typer.Option("--max-new-tokens", help="Tokens each request asks for.")
    ] = D.STORM_MAX_NEW_TOKENS,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Random seed of the schedule and prompts.")] = None,
    router: Annotated[
        Optional[str],
        typer.Option(
            "--router",
            help="host:port of the inventory's router (default: its first router). Anything else is refused.",
        ),
    ] = None,
    json_out: JsonOpt = False,
    report: ReportOpt = None,
) -> None:
    """Run an abort storm through the router and check that inflight drains.

    \b
    Examples:
      pdctl storm                           # the seed's storm: 90 random aborts
      pdctl storm --target transfer-window  # aborts aimed at the transfer window
      pdctl storm -i prod.yaml --seed 7     # on prod, a repeatable schedule

    Streaming requests go through the inventory's router, each closed by the client at its abort
    time; then inflight is watched until it drains.

    A pass where no abort landed in the transfer window is marked weak: the race was not exercised.

    Exit 0 drained and stayed 0, 1 not drained or pinned, 2 bad options, 130 interrupted."""
    from pdctl import render
    from pdctl.checks.router_address import parse_router_address
    from pdctl.errors import UsageError
    from pdctl.ops.storm import storm as run
    from pdctl.ops.storm_plan import StormConfig

    try:
        cfg = StormConfig(
            requests=requests,
            prompt_tokens=prompt_tokens,
            abort_min_s=abort_min,
            abort_max_s=abort_max,
            sample_every_s=sample_every,
            watch_s=watch,
            target=target,
            calib_requests=calibrate,
            spacing_s=spacing,
            max_new_tokens=max_new_tokens,
            seed=seed,
            aim_lo_frac=aim_from,
            aim_hi_frac=aim_to,
        )
    except ValueError as e:
        raise UsageError(str(e)) from None
    if router is not None:  # a malformed address is refused before any host is contacted
        try:
            parse_router_address(router)
        except ValueError as e:
            raise UsageError(f"--router {router!r}: {e}", hint="give host:port of the inventory's router") from None
    with open_deployment(inventory, quiet=progress_quiet(json_out)) as dep:
        rep = run(dep, cfg, router=router)
    if json_out:
        render.emit_json(to_data(rep))
    else:
        render.storm_report(rep)
    code = rep.exit_code()
    if code:
        raise typer.Exit(code)
