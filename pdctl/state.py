"""Where pdctl keeps its own state on the operator's machine (XDG state directory)."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """$XDG_STATE_HOME/pdctl (default ~/.local/state/pdctl), created 0700 on first use (it holds the audit log,
    baselines and lineage records; every file in it is written by pdctl.safe_write all the same)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    d = Path(base) / "pdctl"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    return d


def audit_log_path() -> Path:
    return Path(os.environ.get("PDCTL_AUDIT_LOG") or state_dir() / "audit.jsonl")


def lineage_path(inventory_name: str) -> Path:
    d = state_dir() / "lineage"
    d.mkdir(mode=0o700, exist_ok=True)
    return d / f"{inventory_name}.json"


def operator() -> str:
    """Who is acting: $PDCTL_OPERATOR, else user@host."""
    import getpass
    import socket

    who = os.environ.get("PDCTL_OPERATOR")
    if who:
        return who
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry in some containers
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"
