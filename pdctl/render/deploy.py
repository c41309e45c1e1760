"""What `pdctl deploy` prints: the plan (--dry-run) and the outcome."""

from __future__ import annotations

from pdctl import render
from pdctl.render.escape_controls import Text
from pdctl.render.tables import steps_table
from pdctl.render.terminal_safe import printable as p


def deploy_plan(plan) -> None:
    from pdctl.render.terminal_safe import env_line, shell_line
    from pdctl.secrets import mask_argv, mask_env, secret_values

    c = render.console()
    for r in plan.roles:
        state = ("changed" if r.changed else "unchanged") + (", running" if r.running else ", not running")
        c.print(Text(p(f"{r.label}  service {r.service}  [{state}]"), style="bold"))
        secrets = secret_values(r.env, r.argv)  # scrubbed from env names and other values too
        env = mask_env(r.env, secrets)
        if env:
            c.print(Text("  env: " + env_line(env)), soft_wrap=True)
        # soft_wrap: a command line stays one line, so it can be copied or grepped whatever the width
        c.print(Text("  " + shell_line(mask_argv(r.argv, secrets))), soft_wrap=True)
        for change in r.changes:
            c.print(Text(f"  change: {p(change)}", style="yellow"), soft_wrap=True)  # a value is copied whole
    c.print(Text(f"action: {plan.action} ({plan.reason})", style="bold"))
    c.print(Text(f"from the hosts: {plan.from_hosts}", style="dim"))


def deploy_outcome(plan, steps) -> None:
    """After a deploy ran: what it did, in one line, then its steps."""
    c = render.console()
    if plan.action == "none":
        c.print(Text(f"deploy: nothing to do ({plan.reason})", style="bold"))
        return
    c.print(Text(f"deploy: co-restarted prefill -> decode -> router ({plan.reason})", style="bold"))
    for r in plan.roles:
        for change in r.changes:
            c.print(Text(p(f"  {r.label}: {change}"), style="yellow"), soft_wrap=True)
    if steps:
        c.print(steps_table(steps))
