"""What `pdctl render` prints: each role's command line, env (masked), interpreter, and unit or launcher."""

from __future__ import annotations

from rich.cells import cell_len

from pdctl.render.escape_controls import Text

#: said with every offline rendering whose interpreter was not declared
DEFAULT_PYTHON_NOTE = (
    "not declared (hosts.{host}.python): a first deploy records this one; a later deploy keeps "
    "the one installed on the host"
)


def render_plan(plan) -> None:
    """Print a `RenderPlan`; long lines (commands, unit lines) stay whole so they can be copied or grepped."""
    from pdctl import render
    from pdctl.render.layout import wrap_keeping_commands
    from pdctl.render.terminal_safe import env_line, shell_line
    from pdctl.render.terminal_safe import printable as p

    c = render.console()
    c.print(Text("rendered offline: no host was contacted", style="bold"))
    c.print(Text(f"  inventory: {p(plan.inventory)}"), soft_wrap=True)  # a long path stays whole
    for r in plan.roles:
        c.print(Text(p(f"{r.label}  service {r.service}  ({r.manager} on {r.host})"), style="bold"))
        if r.problem:
            c.print(Text(f"  cannot be written: {p(r.problem)}", style="bold red"), soft_wrap=True)
        py = f"  python: {p(r.python)}"
        if r.python_source != "default":
            c.print(Text(py + "  (declared)"), soft_wrap=True)
        else:  # the path stays whole on its line; the note is prose, wrapped under it
            note = f"({DEFAULT_PYTHON_NOTE.format(host=p(r.host))})"
            if cell_len(py) + 2 + cell_len(note) <= c.width:
                c.print(Text(f"{py}  {note}"))
            else:
                c.print(Text(py), soft_wrap=True)
                for line in wrap_keeping_commands(note, c.width - 4):
                    c.print(Text("    " + line), soft_wrap=True)
        c.print(Text("  command: " + shell_line(r.argv)), soft_wrap=True)
        c.print(Text("  env: " + (env_line(r.env) or "(none)")), soft_wrap=True)
        if r.text:
            c.print(Text(f"  {p(r.path)}:", style="bold"))
            for line in r.text.rstrip("\n").splitlines():
                c.print(Text("    " + p(line)), soft_wrap=True)
        if r.launcher:
            c.print(Text("  started with:", style="bold"))
            c.print(Text("    " + p(r.launcher)), soft_wrap=True)
