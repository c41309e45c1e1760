"""docs/cli.md is generated from `--help`; this fails when it drifts from a fresh generation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REGENERATE = "python scripts/gen_cli_reference.py"


def _generate() -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TERMINAL_WIDTH")}
    p = subprocess.run([sys.executable, "scripts/gen_cli_reference.py", "--stdout"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_cli_reference_is_up_to_date():
    fresh = _generate()
    current = (REPO / "docs" / "cli.md").read_text() if (REPO / "docs" / "cli.md").exists() else ""
    assert current == fresh, f"docs/cli.md is out of date with `pdctl --help`: regenerate it with `{REGENERATE}`"


def test_cli_reference_covers_every_command():
    fresh = _generate()
    for cmd in ("deploy", "verify final-health", "restart", "status", "down", "logs", "run", "history"):
        assert f"## `pdctl {cmd}`" in fresh


def test_generation_is_stable_whatever_the_callers_terminal():
    env = {**os.environ, "COLUMNS": "57", "TERM": "xterm-256color"}
    p = subprocess.run([sys.executable, "scripts/gen_cli_reference.py", "--stdout"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout == _generate()
