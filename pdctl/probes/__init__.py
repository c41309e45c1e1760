"""Scripts pdctl ships to a host and runs there with the host's own interpreter (stdlib only, never imported by
pdctl itself): the host's installed packages answer, not pdctl's environment. `source(name)` is a script's text."""

from __future__ import annotations

from pathlib import Path


def source(name: str) -> str:
    """The text of the probe script `name` (e.g. "lint_probe"), to run as `python -c TEXT`."""
    return (Path(__file__).parent / f"{name}.py").read_text(encoding="utf-8")
