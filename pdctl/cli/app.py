"""The root `pdctl` app: each command lives in its own module; this file only wires them together."""

from __future__ import annotations

import typer

from pdctl.cli import deploy, lifecycle, restart, storm, triage, verify
from pdctl.cli import history, render_cmd, run

app = typer.Typer(
    name="pdctl",
    help="Deploy, verify and co-restart prefill/decode disaggregated LLM deployments (SGLang PD).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("deploy")(deploy.deploy)
app.add_typer(verify.app, name="verify")
app.command("restart")(restart.restart)
app.command("status")(lifecycle.status)
app.command("down")(lifecycle.down)
app.command("logs")(lifecycle.logs)
app.command("run")(run.run)
app.command("history")(history.history)
app.command("storm")(storm.storm)
app.command("triage")(triage.triage)
app.command("render")(render_cmd.render)
