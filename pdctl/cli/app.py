"""The root `pdctl` app: each command lives in its own module; this file only names them.

A command's module is imported, and typer builds the command, only when the command line names it (see
pdctl/cli/lazy_commands.py): `pdctl storm --help` does not pay for the other eleven."""

from __future__ import annotations

from typing import Annotated

import typer

from pdctl.cli.common import PdctlGroup
from pdctl.cli.lazy_commands import LazyCommands

#: name -> "module:function" (or "module:typer app" for a group), in the order `pdctl --help` lists them
COMMANDS = {
    "deploy": "pdctl.cli.deploy:deploy",
    "restart": "pdctl.cli.restart:restart",
    "status": "pdctl.cli.lifecycle:status",
    "down": "pdctl.cli.lifecycle:down",
    "logs": "pdctl.cli.lifecycle:logs",
    "run": "pdctl.cli.run:run",
    "history": "pdctl.cli.history:history",
    "storm": "pdctl.cli.storm:storm",
    "triage": "pdctl.cli.triage:triage",
    "render": "pdctl.cli.render_cmd:render",
    "lint": "pdctl.cli.lint:lint",
    "ssh": "pdctl.cli.ssh_cmd:ssh",
    "verify": "pdctl.cli.verify:app",
    "watch": "pdctl.cli.watch:watch",
    "incident": "pdctl.cli.incident:incident",
}


class RootGroup(PdctlGroup):
    """`pdctl`: its commands are the COMMANDS above, built when named."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.commands = LazyCommands(COMMANDS)


app = typer.Typer(
    name="pdctl",
    cls=RootGroup,
    help="Deploy, verify and co-restart prefill/decode disaggregated LLM deployments (SGLang PD).",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish)
    context_settings={"help_option_names": ["-h", "--help"]},  # subcommands inherit it
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help is drawn by pdctl.cli.help_format: rich stays off the --help and error paths
)


def _print_version(value: bool) -> None:
    if value:
        from pdctl import __version__

        typer.echo(f"pdctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print pdctl's version and exit.")
    ] = False,
) -> None:
    """Deploy, verify and co-restart prefill/decode disaggregated LLM deployments (SGLang PD)."""
