"""`pdctl deploy`."""

from __future__ import annotations

import typer

from pdctl.cli.common import DryRunOpt, InventoryOpt, JsonOpt, handle_errors, open_deployment, progress_quiet
from pdctl.errors import ExitCode
from pdctl.serialize import to_data


@handle_errors
def deploy(
    inventory: InventoryOpt = None,
    dry_run: DryRunOpt = False,
    json_out: JsonOpt = False,
    no_verify: bool = typer.Option(False, "--no-verify", help="Skip final-health after starting."),
    skip_lint: bool = typer.Option(
        False, "--skip-lint", help="Do not check the new command lines on their hosts first (audited)."
    ),
) -> None:
    """Render, install and start prefill -> decode -> router (each gated on readiness), then run final-health."""
    from pdctl import render
    from pdctl.ops.deploy import deploy as run_deploy

    with open_deployment(inventory, quiet=progress_quiet(json_out)) as dep:
        result = run_deploy(dep, dry_run=dry_run, verify=not no_verify, skip_lint=skip_lint)
    if json_out:
        render.emit_json(to_data(result))
    else:
        for w in result.warnings:
            render.warning(w)
        if dry_run:
            render.deploy_plan(result.plan)
        else:
            render.deploy_outcome(result.plan, result.steps)
        if result.health:
            render.health_report(result.health)
    if not result.ok:
        raise typer.Exit(ExitCode.CHECK_FAILED)
