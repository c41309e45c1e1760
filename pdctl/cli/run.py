"""`pdctl run PLAYBOOK`: run an on-call runbook (a playbook) step by step, gated, audited."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pdctl.cli import complete_values
from pdctl.cli.common import DryRunOpt, InventoryOpt, JsonOpt, ReportOpt, handle_errors, open_deployment, progress_quiet
from pdctl.serialize import to_data


@handle_errors
def run(
    playbook: Annotated[
        str,
        typer.Argument(
            autocompletion=complete_values.complete_playbook,
            help="A playbook file, or the name of a shipped playbook "
            "(final-health, co-restart, stall-triage, abort-storm-ab, deploy-fix).",
        ),
    ],
    inventory: InventoryOpt = None,
    var: Annotated[
        Optional[list[str]],
        typer.Option(
            "--var",
            help="Set a playbook variable: NAME=VALUE (repeatable; 10 is a whole number, 1e3 and .5 numbers, "
            "true/false booleans, anything else text as given: 0777, 1:30 and yes stay text). A NAME that "
            "looks secret (TOKEN, KEY, SECRET, PASSWORD, CREDENTIAL, AUTH) is text as given and masked like "
            "--secret-var.",
        ),
    ] = None,
    secret_var: Annotated[
        Optional[list[str]],
        typer.Option(
            "--secret-var",
            help="Set a playbook variable whose value is secret: NAME=VALUE (repeatable). VALUE is "
            "text exactly as given (never a number: 10 stays the text 10). It is masked wherever "
            "it would show: plan, step lines, --json, audit log; a value under 4 characters "
            "where it stands as a whole word (not inside one), except a bare number or "
            "true/false/yes/no/on/off of that length.",
        ),
    ] = None,
    apply: Annotated[
        bool, typer.Option("--apply", help="Let steps marked `when: apply` run (e.g. the co-restart of stall-triage).")
    ] = False,
    dry_run: DryRunOpt = False,
    json_out: JsonOpt = False,
    report: ReportOpt = None,
) -> None:
    """Show the plan, run each step with its gate, stop at the first failed gate; exit with that step's code.

    \b
    Examples:
      pdctl run final-health          # the layered check as a runbook
      pdctl run stall-triage --apply  # triage a stall; co-restart if it says so
      pdctl run co-restart --dry-run  # the plan of the co-restart; nothing runs

    PLAYBOOK is a shipped playbook's name or a playbook file of your own (docs/playbooks/README.md)."""
    from pdctl import render
    from pdctl.render import playbook as show
    from pdctl.errors import UsageError
    from pdctl.inventory import load_inventory
    from pdctl.playbook import runner
    from pdctl.playbook.schema import load_playbook, resolve_playbook
    from pdctl.secrets import inventory_secrets
    from pdctl.playbook.vars import parse_cli_vars

    try:
        cli_vars = parse_cli_vars(var)
        secret_vars = parse_cli_vars(secret_var, "--secret-var", secret=True)
    except ValueError as e:
        raise UsageError(str(e)) from None
    cli_vars.update(secret_vars)
    inv = load_inventory(inventory)  # first: the playbook's messages are scrubbed of its declared secrets
    pb = load_playbook(resolve_playbook(playbook), inventory_secrets(inv))
    p = runner.plan(pb, inv, cli_vars=cli_vars, apply=apply, secret_vars=set(secret_vars))
    if dry_run:
        if json_out:
            render.emit_json({"dry_run": True, **to_data(p)})
        else:
            show.plan(p)
        return
    if not json_out:
        show.plan(p, stderr=False)
    printer = show.StepPrinter(len(p.steps), quiet=progress_quiet(json_out))
    hooks = runner.Hooks(step_started=printer.started, step_finished=printer.finished)
    with open_deployment(inv, quiet=progress_quiet(json_out)) as dep:
        result = runner.run(p, dep, hooks=hooks)
    if json_out:
        render.emit_json(to_data(result))
    else:
        show.summary(result)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
