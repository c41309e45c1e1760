"""What `pdctl render` prints: each role's command line, env (masked), interpreter, and unit or launcher."""

from __future__ import annotations

from rich.text import Text

from pdctl.ops.render_plan import DEFAULT_PYTHON_NOTE


def render_plan(plan) -> None:
    """Print a `RenderPlan`; long lines (commands, unit lines) stay whole so they can be copied or grepped."""
    from pdctl import render
    from pdctl.shell import quote_argv

    c = render.console()
    c.print(Text("rendered offline: no host was contacted", style="bold"))
    c.print(Text(f"  inventory: {plan.inventory}"), soft_wrap=True)   # a long path stays whole
    for r in plan.roles:
        c.print(Text(f"{r.label}  service {r.service}  ({r.manager} on {r.host})", style="bold"))
        if r.problem:
            c.print(Text(f"  cannot be written: {r.problem}", style="bold red"), soft_wrap=True)
        py = f"  python: {r.python}"
        c.print(Text(py + (f"  ({DEFAULT_PYTHON_NOTE.format(host=r.host)})" if r.python_source == "default" else "  (declared)")),
                soft_wrap=True)
        c.print(Text("  command: " + quote_argv(r.argv)), soft_wrap=True)
        c.print(Text("  env: " + (" ".join(f"{k}={v}" for k, v in r.env.items()) or "(none)")), soft_wrap=True)
        if r.text:
            c.print(Text(f"  {r.path}:", style="bold"))
            for line in r.text.rstrip("\n").splitlines():
                c.print(Text("    " + line), soft_wrap=True)
        if r.launcher:
            c.print(Text("  started with:", style="bold"))
            c.print(Text("    " + r.launcher), soft_wrap=True)
