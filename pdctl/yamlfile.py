"""Reading an operator's YAML file (inventory, playbook) with errors that name the file, line and column."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pdctl.errors import UsageError


def load_yaml(path: str | os.PathLike, error: type[UsageError], what: str) -> Any:
    """Parse the YAML at `path`. Raises `error` (exit 2) naming the file, and the line and column when it can."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise error(f"{p}: cannot read {what}: {e.strerror}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
        raise error(f"{p}:{where} not valid YAML: {getattr(e, 'problem', e)}") from None
