"""The root `pdctl` app: each command lives in its own module; this file only wires them together."""

from __future__ import annotations

from typing import Annotated

import typer

from pdctl.cli import deploy, lifecycle, restart, storm, triage, verify
from pdctl.cli import history, render_cmd, run, ssh_cmd
from pdctl.cli.common import PdctlCommand, PdctlGroup

app = typer.Typer(
    name="pdctl",
    cls=PdctlGroup,
    help="Deploy, verify and co-restart prefill/decode disaggregated LLM deployments (SGLang PD).",
    no_args_is_help=True,
    add_completion=True,   # --install-completion / --show-completion (bash, zsh, fish)
    context_settings={"help_option_names": ["-h", "--help"]},   # subcommands inherit it
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from pdctl import __version__

        typer.echo(f"pdctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                                help="Print pdctl's version and exit.")] = False) -> None:
    """Deploy, verify and co-restart prefill/decode disaggregated LLM deployments (SGLang PD)."""


def _command(name: str, fn) -> None:
    app.command(name, cls=PdctlCommand)(fn)


_command("deploy", deploy.deploy)
app.add_typer(verify.app, name="verify")
_command("restart", restart.restart)
_command("status", lifecycle.status)
_command("down", lifecycle.down)
_command("logs", lifecycle.logs)
_command("run", run.run)
_command("history", history.history)
_command("storm", storm.storm)
_command("triage", triage.triage)
_command("render", render_cmd.render)
_command("ssh", ssh_cmd.ssh)
