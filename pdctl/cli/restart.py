"""`pdctl restart`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pdctl.cli.common import DryRunOpt, InventoryOpt, JsonOpt, handle_errors, open_deployment, progress_quiet


@handle_errors
def restart(
    inventory: InventoryOpt = None,
    pair: Annotated[bool, typer.Option("--pair", help="Co-restart prefill -> decode -> router (the safe order).")] = False,
    role: Annotated[Optional[list[str]], typer.Option("--role", help="Restart only this role (repeatable).")] = None,
    override_hazard: Annotated[bool, typer.Option(
        "--override-hazard", help="Allow a restart that leaves the pair's KV bootstrap degraded.")] = False,
    dry_run: DryRunOpt = False,
    json_out: JsonOpt = False,
    no_verify: Annotated[bool, typer.Option("--no-verify", help="Skip final-health at the end.")] = False,
    skip_lint: Annotated[bool, typer.Option(
        "--skip-lint", help="Do not check the roles' command lines on their hosts first (audited).")] = False,
) -> None:
    """Restart roles in order under the deployment lock, each gated on readiness, then run final-health."""
    from pdctl import render
    from pdctl.errors import UsageError
    from pdctl.ops.restart import PAIR, restart as run

    if pair == bool(role):
        raise UsageError("say what to restart: --pair, or --role ROLE (not both)")
    roles = PAIR if pair else tuple(role or ())
    bad = [r for r in roles if r not in PAIR]
    if bad:
        raise UsageError(f"--role {bad[0]!r}: unknown role (choose from {', '.join(PAIR)})")
    with open_deployment(inventory, quiet=progress_quiet(json_out)) as dep:
        result = run(dep, roles=roles, dry_run=dry_run, override_hazard=override_hazard, verify=not no_verify,
                     skip_lint=skip_lint)
    if json_out:
        render.emit_json(result.to_dict())
    else:
        for w in result.warnings:
            render.warning(w)
        if dry_run:
            render.lines(["plan:"] + [f"  {i + 1}. {s}" for i, s in enumerate(result.plan)])
        else:
            render.console().print(render.steps_table(result.steps))
            if result.health:
                render.health_report(result.health)
    if not result.ok:
        raise typer.Exit(1)
