#!/usr/bin/env python3
"""Generate docs/cli.md from the `--help` of every pdctl command (walks the typer app).

    python scripts/gen_cli_reference.py           # rewrite docs/cli.md
    python scripts/gen_cli_reference.py --check   # exit 1 if docs/cli.md differs from a fresh generation

Output is stable: fixed width, no colour, no terminal detection (env set before typer/rich are imported).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

WIDTH = 100
ENV = {
    "COLUMNS": str(WIDTH),
    "TERMINAL_WIDTH": str(WIDTH),
    "TERM": "dumb",
    "NO_COLOR": "1",
    "_TYPER_FORCE_DISABLE_TERMINAL": "1",
    "FORCE_COLOR": "",
}
os.environ.update(ENV)
os.environ.pop("FORCE_COLOR", None)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUT = REPO / "docs" / "cli.md"
REGENERATE = "python scripts/gen_cli_reference.py"


def command_paths() -> list[list[str]]:
    """[[], ["deploy"], ["verify"], ["verify", "final-health"], ...] in the app's registration order."""
    import typer

    from pdctl.cli.app import app

    root = typer.main.get_command(app)
    out: list[list[str]] = []

    def walk(cmd, path: list[str]) -> None:
        out.append(path)
        if hasattr(cmd, "list_commands"):  # a group (typer vendors its own click: no isinstance here)
            ctx = typer.Context(cmd) if hasattr(typer, "Context") else None
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), path + [name])

    walk(root, [])
    return out


def help_text(path: list[str]) -> str:
    from typer.testing import CliRunner

    from pdctl.cli.app import app

    r = CliRunner().invoke(app, [*path, "--help"], prog_name="pdctl", env=ENV, terminal_width=WIDTH)
    if r.exit_code != 0:
        raise SystemExit(f"`pdctl {' '.join(path)} --help` exited {r.exit_code}:\n{r.output}")
    return "\n".join(line.rstrip() for line in r.output.strip("\n").splitlines())


def generate() -> str:
    parts = [
        "# pdctl command reference",
        "",
        f"Generated from `--help` by `{REGENERATE}`; do not edit by hand "
        "(tests/unit/test_cli_reference.py fails when this file drifts).",
        "",
    ]
    for path in command_paths():
        title = " ".join(["pdctl", *path])
        parts += [f"## `{title}`", "", "```text", help_text(path), "```", ""]
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    text = generate()
    if "--check" in argv:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            print(f"docs/cli.md is out of date: run `{REGENERATE}`", file=sys.stderr)
            return 1
        return 0
    if "--stdout" in argv:
        sys.stdout.write(text)
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(REPO)} ({len(command_paths())} commands)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
