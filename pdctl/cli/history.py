"""`pdctl history`: the audit log (every mutating action and playbook run), newest last."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from pdctl.cli.common import InventoryOpt, JsonOpt, handle_errors

# The shared -i/--inventory option (same names, same PDCTL_INVENTORY), with what it means here: a filter.
_inv_info = copy.copy(InventoryOpt.__metadata__[0])
_inv_info.help = ("Only records of this inventory: an inventory file (matched by its path) or an inventory's "
                  "name. Without it: the records of every inventory.")
HistoryInventoryOpt = Annotated[Optional[Path], _inv_info]


def _same_path(rec: str, source: str) -> bool:
    """The same file: equal once resolved, or `rec` is a relative path (recorded from another directory) that
    `source` ends with."""
    if not rec or rec.startswith("<") or source.startswith("<"):
        return False
    try:
        want = Path(source).expanduser().resolve()
        got = Path(rec).expanduser()
        if got.resolve() == want:
            return True
    except (OSError, RuntimeError):
        return False
    parts = [p for p in got.parts if p not in (".", "")]
    return not got.is_absolute() and ".." not in parts and bool(parts) and list(want.parts[-len(parts):]) == parts


@functools.lru_cache(maxsize=64)
def _name_in_file(path: str) -> Optional[str]:
    """The `name` of the inventory file a record names, when it can still be read here (records of actions other
    than playbook runs carry only the path)."""
    if not path or path.startswith("<"):
        return "local" if path == "<embedded default>" else None
    try:
        import yaml

        with open(path) as f:
            data = yaml.safe_load(f)
    except (OSError, ValueError, yaml.YAMLError):
        return None
    if not isinstance(data, dict):
        return None
    name = data.get("name", "local")
    return name if isinstance(name, str) else None


def matches_inventory(record: dict[str, Any], *, source: Optional[str] = None, name: Optional[str] = None) -> bool:
    """A record belongs to the inventory file `source` when its `inventory` is that path (as given or resolved),
    and to the inventory called `name` when the inventory it names is called so (`inventory_name` of playbook runs,
    else the file's own `name` when it can be read; the embedded default is "local")."""
    rec = str(record.get("inventory", ""))
    if source is not None:
        return rec == source or _same_path(rec, source)
    rec_name = record.get("inventory_name")
    return rec == name or (rec_name if rec_name is not None else _name_in_file(rec)) == name


@handle_errors
def history(
    inventory: HistoryInventoryOpt = None,
    json_out: JsonOpt = False,
    n: Annotated[int, typer.Option("-n", "--lines", min=1, help="Show the last N records.")] = 20,
    action: Annotated[Optional[str], typer.Option(
        "--action", help="Only records of this action: exact ('run final-health') or its first word ('run').")] = None,
) -> None:
    """Show the audit log, one line per record; --json has the full records. Corrupt lines are shown as such.

    Result: ok, failed, refused, unreachable, usage or interrupted, then the detail's first sentence."""
    from pdctl import audit, render, render_playbook, state

    records = list(audit.read())
    filters: list[str] = []
    if action:
        filters.append(f"--action {action!r}")
        records = [r for r in records if "corrupt" in r or r.get("action") == action
                   or str(r.get("action", "")).startswith(action + " ")]
    if inventory is not None:
        given = str(inventory)
        if inventory.exists():      # an inventory file: the records of that file
            from pdctl.inventory import load_inventory

            load_inventory(inventory)        # a file that is no inventory is a usage error, as everywhere
            match = functools.partial(matches_inventory, source=given)
        elif "/" in given or given.endswith((".yaml", ".yml")):   # a file since removed: its path
            match = functools.partial(matches_inventory, source=given)
        else:                       # an inventory's name
            match = functools.partial(matches_inventory, name=given)
        filters.append(f"-i {given}")
        records = [r for r in records if "corrupt" in r or match(r)]
    if all("corrupt" in r for r in records) and filters:
        records = []    # only corrupt lines left: nothing matched the filters
    records = records[-n:]
    if json_out:
        render.emit_json({"log": str(state.audit_log_path()), "records": records})
    else:
        render_playbook.history(records, filters=filters, log=str(state.audit_log_path()))
