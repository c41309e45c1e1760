"""Reading an operator's YAML file (inventory, playbook): errors that name the file, line and column, and one
plain wording of a validation problem for every such file."""

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


def plain_problem(error: dict[str, Any]) -> tuple[str, str]:
    """(what is wrong, " (got VALUE)" or "") for one entry of pydantic's `ValidationError.errors()`, in words an
    operator reads: "required field is missing", "unknown field", or pydantic's message without its prefix."""
    kind = error["type"]
    msg = {"missing": "required field is missing", "extra_forbidden": "unknown field"}.get(
        kind, error["msg"].removeprefix("Value error, "))
    got = error.get("input")
    got_txt = "" if kind == "missing" or isinstance(got, (dict, list)) else f" (got {got!r})"
    return msg, got_txt
