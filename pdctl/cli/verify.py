"""`pdctl verify ...`: read-only checks."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pdctl.checks.layers import DEFAULT_LAYERS, OPTIONAL_LAYERS
from pdctl.cli import complete_values, inflight as inflight_cmd
from pdctl.cli.common import (
    FINAL_HEALTH_STEP,
    InventoryOpt,
    JsonOpt,
    PdctlCommand,
    PdctlGroup,
    ReportOpt,
    handle_errors,
    open_deployment,
    progress_quiet,
)
from pdctl.errors import ExitCode
from pdctl.serialize import to_data

app = typer.Typer(
    name="verify",
    cls=PdctlGroup,
    help="Read-only checks of a deployment.",
    no_args_is_help=True,
    add_completion=False,  # the root has the completion options
    rich_markup_mode=None,
)  # as the root app: no rich on the --help path

app.command("inflight", cls=PdctlCommand)(inflight_cmd.inflight)


@app.command("final-health", cls=PdctlCommand)
@handle_errors
def final_health(
    inventory: InventoryOpt = None,
    json_out: JsonOpt = False,
    report: ReportOpt = None,
    layer: Annotated[
        Optional[list[str]],
        typer.Option(
            "--layer",
            autocompletion=complete_values.complete_layer,
            help=f"Run only these layers (repeat, or comma-separate): {', '.join(DEFAULT_LAYERS)}; "
            f"{', '.join(OPTIONAL_LAYERS)} (a sampled window; a canary per pair) only when named.",
        ),
    ] = None,
    record_baseline: Annotated[
        bool,
        typer.Option(
            "--record-baseline",
            help="Save the current transfer/bootstrap failure counters as the baseline; only when "
            "every worker's were read (else the old one stays and the check fails).",
        ),
    ] = False,
    since_baseline: Annotated[
        bool,
        typer.Option(
            "--since-baseline", help="Transfer layer: fail only if failures grew since the recorded baseline."
        ),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", help="Show every check's row, passing ones too (default: one line per layer)."),
    ] = False,
) -> None:
    """The seed's closing check: health, an end-to-end probe, transfer failures, live flags/env, restart lineage.

    Exit 0 every check passed or warned, 1 a check failed, 3 none failed but one could not be asked (unknown)."""
    from pdctl import render
    from pdctl.checks.layers import parse_layer_names
    from pdctl.errors import UsageError
    from pdctl.ops.verify import final_health_with_baseline

    try:
        layers = parse_layer_names(layer)
    except ValueError as e:
        raise UsageError(f"--layer: {e}") from None
    with open_deployment(inventory, quiet=progress_quiet(json_out), reported=FINAL_HEALTH_STEP) as dep:
        health = final_health_with_baseline(dep, since_baseline=since_baseline, record=record_baseline, layers=layers)
    if json_out:
        render.emit_json(to_data(health))
    else:
        render.health_report(health, verbose=verbose)
    if health.failures():
        raise typer.Exit(ExitCode.CHECK_FAILED)
    if health.unknown():  # nothing failed, but something could not be asked: not a pass
        raise typer.Exit(ExitCode.UNREACHABLE)


@app.command("pairs", cls=PdctlCommand)
@handle_errors
def pairs(
    inventory: InventoryOpt = None,
    json_out: JsonOpt = False,
    report: ReportOpt = None,
    budget: Annotated[
        Optional[float],
        typer.Option(
            "--budget",
            help="Seconds for the whole matrix (default: final_health.probe.timeout); each decode's "
            "canaries share it, one prefill at a time.",
        ),
    ] = None,
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", help="Show everything: each failed pair's room and abort, the instances."),
    ] = False,
) -> None:
    """A canary through every prefill x decode pair, sent straight to both workers as the router sends one.

    Exit 0 every pair passed, 1 a pair failed (named "prefill[0] -> decode[1]"), 3 a host did not answer. A canary
    past its time is closed and its request aborted on both workers (POST /abort_request)."""
    import math

    from pdctl import render
    from pdctl.errors import UsageError
    from pdctl.ops.pairs import verify_pairs

    if budget is not None and (not math.isfinite(budget) or not 0 < budget <= 3600):
        raise UsageError(f"--budget {budget:g}: must be a number of seconds > 0 and at most 3600")
    with open_deployment(inventory, quiet=progress_quiet(json_out)) as dep:
        rep = verify_pairs(dep, budget)
    if json_out:
        render.emit_json(to_data(rep))
    else:
        render.pairs_report(rep, verbose=verbose)
    if rep.exit_code:
        raise typer.Exit(rep.exit_code)


@app.command("outputs", cls=PdctlCommand)
@handle_errors
def outputs(
    inventory: InventoryOpt = None,
    json_out: JsonOpt = False,
    report: ReportOpt = None,
    sessions: Annotated[
        int, typer.Option("--sessions", help="Sessions (1-256), and the concurrency of the second run.")
    ] = 30,
    turns: Annotated[int, typer.Option("--turns", help="Turns per session (1-8).")] = 2,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Greedy tokens per answer (1-512).")] = 24,
    early_tokens: Annotated[
        int,
        typer.Option("--early-tokens", help="An answer that parts before this token is corrupt; later: late."),
    ] = 8,
    strict: Annotated[
        bool, typer.Option("--strict", help="Count a late divergence as corruption (a batch-invariant engine).")
    ] = False,
    pairs: Annotated[
        bool, typer.Option("--pairs/--no-pairs", help="Also send the first prompt through every pair straight.")
    ] = True,
) -> None:
    """Is what PD serves right? The same greedy prompts at concurrency 1, then at concurrency --sessions through
    the routers, and through every prefill x decode pair straight; answers compared token for token.

    Exit 0 every answer agreed and PD was used, 1 corruption, a failed request, a disagreeing pair or a PD that is
    not PD, 3 nothing failed but something could not be judged."""
    from pdctl import render
    from pdctl.errors import UsageError
    from pdctl.ops.outputs import OutputsSettings, verify_outputs

    for flag, value, most in (("--sessions", sessions, 256), ("--turns", turns, 8), ("--max-tokens", max_tokens, 512)):
        if not 1 <= value <= most:
            raise UsageError(f"{flag} {value}: must be from 1 to {most}")
    if not 1 <= early_tokens <= max_tokens:
        raise UsageError(f"--early-tokens {early_tokens}: must be from 1 to --max-tokens ({max_tokens})")
    settings = OutputsSettings(sessions, turns, max_tokens, early_tokens, strict, pairs)
    with open_deployment(inventory, quiet=progress_quiet(json_out)) as dep:
        rep = verify_outputs(dep, settings)
    if json_out:
        render.emit_json(to_data(rep))
    else:
        render.outputs_report(rep)
    if rep.exit_code:
        raise typer.Exit(rep.exit_code)
