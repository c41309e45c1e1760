"""`pdctl restart`."""

from __future__ import annotations

import math
from typing import Annotated, Optional

import typer

from pdctl.cli import complete_values
from pdctl.cli.common import DryRunOpt, InventoryOpt, JsonOpt, handle_errors, open_deployment, progress_quiet
from pdctl.errors import ExitCode
from pdctl.serialize import to_data


@handle_errors
def restart(
    inventory: InventoryOpt = None,
    pair: Annotated[
        bool, typer.Option("--pair", help="Co-restart prefill -> decode -> router (the safe order).")
    ] = False,
    role: Annotated[
        Optional[list[str]],
        typer.Option(
            "--role", autocompletion=complete_values.complete_role, help="Restart only this role (repeatable)."
        ),
    ] = None,
    rolling: Annotated[
        bool,
        typer.Option(
            "--rolling",
            help="Restart every prefill and decode unit by unit, each taken out of the routers first, "
            "so the service stays up (docs/pairs.md).",
        ),
    ] = False,
    drain_timeout: Annotated[
        float,
        typer.Option(
            "--drain-timeout", help="--rolling: seconds a worker out of the routers may take to finish its requests."
        ),
    ] = 60.0,
    first_pair: Annotated[
        Optional[list[str]],
        typer.Option(
            "--first-pair",
            metavar="P:D",
            autocompletion=complete_values.complete_pair,
            help="--rolling: restart the workers of the pair prefill[P] -> decode[D] "
            "first (repeatable), e.g. a pair `pdctl verify pairs` failed: 0:1, 0,1 (what TAB completes) or "
            "'prefill[0] -> decode[1]'.",
        ),
    ] = None,
    override_hazard: Annotated[
        bool, typer.Option("--override-hazard", help="Allow a restart that leaves the pair's KV bootstrap degraded.")
    ] = False,
    dry_run: DryRunOpt = False,
    json_out: JsonOpt = False,
    no_verify: Annotated[bool, typer.Option("--no-verify", help="Skip final-health at the end.")] = False,
    skip_lint: Annotated[
        bool, typer.Option("--skip-lint", help="Do not check the roles' command lines on their hosts first (audited).")
    ] = False,
) -> None:
    """Restart roles in order under the deployment lock, each gated on readiness, then run final-health.

    \b
    Examples:
      pdctl restart --pair --dry-run            # the plan; nothing changes
      pdctl restart --pair                      # the clean co-restart, verified
      pdctl restart --rolling --first-pair 0:1  # unit by unit, pair 0:1 first

    --pair is the seed's fix for the degraded bootstrap. --rolling keeps the service up: each unit leaves the
    routers, drains, is co-restarted and canaried, then rejoins (docs/pairs.md). --role alone is refused when it
    would leave a pair's KV bootstrap degraded (--override-hazard, recorded in the audit log)."""
    from pdctl import render
    from pdctl.errors import UsageError
    from pdctl.ops.restart import PAIR, restart as run

    if [pair, bool(role), rolling].count(True) != 1:
        raise UsageError("say what to restart: --pair, --rolling, or --role ROLE (one of them)")
    if first_pair and not rolling:
        raise UsageError("--first-pair goes with --rolling", hint="--pair restarts every pair at once")
    firsts = [pair_indices(v) for v in first_pair or ()]
    if not (math.isfinite(drain_timeout) and drain_timeout >= 0):  # nan would never time out
        raise UsageError(f"--drain-timeout {drain_timeout:g}: seconds must be a finite number >= 0")
    if rolling:
        return _rolling(
            inventory,
            dry_run=dry_run,
            json_out=json_out,
            verify=not no_verify,
            skip_lint=skip_lint,
            drain_timeout=drain_timeout,
            first_pairs=firsts,
        )
    roles = PAIR if pair else tuple(role or ())
    bad = [r for r in roles if r not in PAIR]
    if bad:
        raise UsageError(f"--role {bad[0]!r}: unknown role (choose from {', '.join(PAIR)})")
    with open_deployment(inventory, quiet=progress_quiet(json_out)) as dep:
        result = run(
            dep,
            roles=roles,
            dry_run=dry_run,
            override_hazard=override_hazard,
            verify=not no_verify,
            skip_lint=skip_lint,
        )
    if json_out:
        render.emit_json(to_data(result))
    else:
        for w in result.warnings:
            render.warning(w)
        if dry_run:
            render.plan_lines(result.plan)
        else:
            render.console().print(render.steps_table(result.steps))
            if result.health:
                render.health_report(result.health)
    if not result.ok:
        raise typer.Exit(ExitCode.CHECK_FAILED)


def pair_indices(text: str) -> tuple[int, int]:
    """`--first-pair` as (prefill, decode) indices: `0:1`, `0,1`, or the pair as the screens name it,
    `prefill[0] -> decode[1]`. UsageError naming the value otherwise."""
    import re

    from pdctl.errors import UsageError

    m = re.fullmatch(r"\s*(?:prefill\[)?(\d+)\]?\s*(?:->|:|,)\s*(?:decode\[)?(\d+)\]?\s*", text)
    if m is None:
        raise UsageError(
            f"--first-pair {text!r}: expected P:D (prefill and decode indices, e.g. 0:1) or 'prefill[0] -> decode[1]'"
        )
    return int(m.group(1)), int(m.group(2))


def _rolling(
    inventory,
    *,
    dry_run: bool,
    json_out: bool,
    verify: bool,
    skip_lint: bool,
    drain_timeout: float,
    first_pairs: list[tuple[int, int]],
) -> None:
    from pdctl import render
    from pdctl.errors import UsageError
    from pdctl.ops.rolling import rolling_restart
    from pdctl.render.rolling import rolling_report

    with open_deployment(inventory, quiet=progress_quiet(json_out)) as dep:
        n_p, n_d = len(dep.inv.roles.prefill), len(dep.inv.roles.decode)
        for p, d in first_pairs:
            if p >= n_p or d >= n_d:
                raise UsageError(
                    f"--first-pair {p}:{d}: the inventory has prefill[0..{n_p - 1}] and decode[0..{n_d - 1}]"
                )
        result = rolling_restart(
            dep,
            dry_run=dry_run,
            drain_timeout=drain_timeout,
            verify=verify,
            skip_lint=skip_lint,
            broken_pairs=first_pairs,
            pairs_why="named by --first-pair",
        )
    if json_out:
        render.emit_json(to_data(result))
    else:
        rolling_report(result)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
