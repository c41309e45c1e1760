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
    p = subprocess.run(
        [sys.executable, "scripts/gen_cli_reference.py", "--stdout"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
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
    p = subprocess.run(
        [sys.executable, "scripts/gen_cli_reference.py", "--stdout"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0 and p.stdout == _generate()


def test_inventory_reference_lists_every_field():
    """docs/inventory.md names every field of every inventory model (so a new field cannot go undocumented)."""
    import re

    from pdctl import inventory as m

    text = (REPO / "docs" / "inventory.md").read_text()
    for model in (m.Inventory, m.Host, m.RoleInstance, m.FinalHealth, m.Probe, m.Expect, m.WatchSettings):
        for name in model.__struct_fields__:
            if name == "source":
                continue
            assert re.search(rf"`([A-Za-z_.]*\.)?{name}`", text), f"docs/inventory.md lacks {model.__name__}.{name}"


def test_every_shipped_playbook_has_a_page():
    from pdctl.playbook.schema import shipped_playbooks

    for name in shipped_playbooks():
        assert (REPO / "docs" / "playbooks" / f"{name}.md").exists(), name
