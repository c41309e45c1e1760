"""`pdctl lint`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pdctl.cli import complete_values
from pdctl.cli.common import InventoryOpt, JsonOpt, ReportOpt, handle_errors, open_deployment, progress_quiet
from pdctl.errors import ExitCode

RoleOpt = Annotated[
    Optional[str],
    typer.Option(
        "--role",
        autocompletion=complete_values.complete_role_or_instance,
        help="Only this role (prefill, decode, router) or instance (decode[0]).",
    ),
]


@handle_errors
def lint(
    inventory: InventoryOpt = None,
    role: RoleOpt = None,
    json_out: JsonOpt = False,
    report: ReportOpt = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show everything, past one screen: every doc link, every note.")
    ] = False,
) -> None:
    """Check every role's command line and env with the SGLang / sglang-router installed on its host.

    Each role's host runs the parser of what it has installed (the role's own interpreter and working directory):
    unknown, ambiguous or badly valued flags, SGLANG_* env names and values against that version's registry, and
    the safety nets recipes switch off (docs/lint.md lists every rule). Exit 1 on an error or warning that the
    inventory does not silence; changes nothing."""
    from pdctl import render
    from pdctl.ops.lint import lint as run
    from pdctl.serialize import to_data

    with open_deployment(inventory, quiet=progress_quiet(json_out)) as dep:
        found = run(dep, role=role)
    if json_out:
        render.emit_json(to_data(found))
    else:
        render.lint_report(found, verbose=verbose)
    if not found.ok:
        raise typer.Exit(ExitCode.CHECK_FAILED)
