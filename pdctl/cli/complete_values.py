"""What a TAB completes for an option's or argument's value: layers, heal modes, storm targets, the roles and
instances and pairs of the inventory on the command line, playbooks.

Each value source is a pure function of what it needs (an inventory path, the word being typed) returning
(value, what it is) pairs; each `complete_*` is the typer `autocompletion=` hook of a parameter, reading the
inventory and earlier values from the click context (what was typed before the cursor, as parsed so far). typer
keeps the candidates that start with the word typed; bash shows the values, zsh and fish their descriptions too.
When a hook has nothing to offer it answers nothing, and the shell falls back to file names.

A TAB is a whole pdctl process: nothing here imports more than the standard library at module level, and a
source imports what it reads (the layer list, the inventory loader, the playbook finder) only when asked. No
source contacts a host: the inventory is read from its file, or is the embedded default."""

from __future__ import annotations

import os
from typing import Any, Iterable, Optional

Candidate = tuple[str, str]  # (value, what it is: zsh and fish show it next to the value)

#: `--heal` of `pdctl watch`: the modes and what each does
HEAL_MODES: tuple[Candidate, ...] = (
    ("off", "watch and alert only"),
    ("dry", "say what it would heal, do nothing"),
    ("on", "heal the known cases, guarded"),
)
_TARGET_HELP = {"random": "the seed's storm: aborts at random times", "transfer-window": "aimed at the KV transfer"}
_MAX_FILES = 200  # a directory of thousands of files lists no more than this


# -- the value sources (pure but for reading the inventory or a directory) --------------------------------------------


def layer_names(incomplete: str = "", given: Iterable[str] = ()) -> list[Candidate]:
    """Every final-health layer (pdctl.checks.layers), each with its title, but those already named (in `given`,
    earlier `--layer`s, or before a comma in `incomplete`): `--layer health,e` completes to `health,e2e`."""
    from pdctl.checks.layers import LAYERS

    done, _, _ = incomplete.rpartition(",")
    named = {x.strip() for v in [*given, done] for x in v.split(",") if x.strip()}
    prefix = done + "," if done else ""
    return [
        (prefix + x.name, x.title + (" (only when named)" if x.optional else "")) for x in LAYERS if x.name not in named
    ]


def heal_modes() -> list[Candidate]:
    return list(HEAL_MODES)


def storm_targets() -> list[Candidate]:
    """`pdctl storm --target`: pdctl.ops.storm_plan.TARGETS."""
    from pdctl.ops.storm_plan import TARGETS

    return [(t, _TARGET_HELP.get(t, "")) for t in TARGETS]


def _inventory(path: Optional[str]) -> Any:
    """The inventory the command would use: the file given (-i or $PDCTL_INVENTORY: click has read both into the
    option), else the embedded default; None when the file does not load (a TAB is no place for its error)."""
    from pdctl.errors import PdctlError
    from pdctl.inventory import load_inventory

    try:
        return load_inventory(os.path.expanduser(path) if path else None)  # the shell passes `~` unexpanded
    except (PdctlError, OSError, ValueError):
        return None


def role_names(inventory: Optional[str] = None) -> list[Candidate]:
    """prefill, decode, router; with an inventory file given, each with how many instances it declares (when the
    file loads; the embedded default is not loaded for this)."""
    from pdctl.inventory import ROLES

    inv = _inventory(inventory) if inventory is not None else None
    if inv is None:
        return [(r, "role") for r in ROLES]
    return [(r, f"role: {len(getattr(inv.roles, r))} in {inv.name}") for r in ROLES]


def role_instances(inventory: Optional[str] = None) -> list[Candidate]:
    """Each role, then each of its instances as the screens name it (`decode[1]`) with its host:port, from the
    inventory (the embedded default when None); only the role names when the file does not load."""
    from pdctl.inventory import ROLES

    inv = _inventory(inventory)
    if inv is None:
        return [(r, "role") for r in ROLES]
    out: list[Candidate] = []
    for role in ROLES:
        instances = getattr(inv.roles, role)
        out.append((role, f"every {role} ({len(instances)})"))
        out += [(f"{role}[{i}]", f"{x.host}:{x.port}") for i, x in enumerate(instances)]
    return out


def instance_numbers(inventory: Optional[str], role: Optional[str]) -> list[Candidate]:
    """`pdctl logs ROLE --index`: the numbers of ROLE's instances in the inventory, each with its host:port."""
    inv = _inventory(inventory)
    instances = getattr(inv.roles, role, None) if inv is not None and role else None
    return [(str(i), f"{role}[{i}] {x.host}:{x.port}") for i, x in enumerate(instances or ())]


def pair_refs(inventory: Optional[str] = None) -> list[Candidate]:
    """`--first-pair`: every prefill x decode pair of the inventory as `P,D` (which it takes as it takes `P:D`: bash
    splits a word at `:`, so a second TAB after `0:` would complete another word), described as `pdctl verify
    pairs` names the pair."""
    inv = _inventory(inventory)
    if inv is None:
        return []
    return [
        (f"{p},{d}", f"prefill[{p}] -> decode[{d}]")
        for p in range(len(inv.roles.prefill))
        for d in range(len(inv.roles.decode))
    ]


def playbook_refs(incomplete: str = "") -> list[Candidate]:
    """`pdctl run PLAYBOOK`: the shipped playbooks by name (pdctl.playbook.schema.shipped_playbooks), then the
    *.yaml / *.yml files in the directory being typed (the current one when no `/` yet), as typed so far."""
    from pdctl.playbook.schema import shipped_playbooks

    out: list[Candidate] = []
    head = incomplete[: incomplete.rfind("/") + 1]  # "playbooks/" of "playbooks/co", "" of "co"
    if not head:
        out += [(name, "shipped playbook") for name in shipped_playbooks()]
    folder = os.path.expanduser(head) if head else "."
    try:
        with os.scandir(folder) as it:
            names = sorted(
                e.name
                for e in it
                if e.name.endswith((".yaml", ".yml"))
                and (not e.name.startswith(".") or incomplete[len(head) :].startswith("."))  # as ls: asked
                and e.is_file()
            )
    except OSError:
        names = []
    out += [(head + name, "playbook file") for name in names[:_MAX_FILES]]
    return out


# -- the typer hooks: `typer.Option(..., autocompletion=complete_layer)` ---------------------------------------------


def _given(ctx: Any, name: str) -> Any:
    """A parameter's value parsed so far (None when not given or not parsed)."""
    return (getattr(ctx, "params", None) or {}).get(name)


def _inventory_given(ctx: Any) -> Optional[str]:
    value = _given(ctx, "inventory")
    return str(value) if value else None


def complete_layer(ctx: Any, incomplete: str) -> list[Candidate]:
    return layer_names(incomplete, _given(ctx, "layer") or ())


def complete_heal(ctx: Any, incomplete: str) -> list[Candidate]:
    return heal_modes()


def complete_target(ctx: Any, incomplete: str) -> list[Candidate]:
    return storm_targets()


def complete_role(ctx: Any, incomplete: str) -> list[Candidate]:
    """A role name only (`restart --role`, `logs ROLE`)."""
    return role_names(_inventory_given(ctx))


def complete_role_or_instance(ctx: Any, incomplete: str) -> list[Candidate]:
    """A role or one instance (`lint --role`, `render --role`)."""
    return role_instances(_inventory_given(ctx))


def complete_index(ctx: Any, incomplete: str) -> list[Candidate]:
    """`logs ROLE --index`: while an option still lacks its value, click leaves the arguments unparsed, in
    `ctx.args`: the role is the first of them that names one."""
    from pdctl.inventory import ROLES

    role = _given(ctx, "role") or next((a for a in getattr(ctx, "args", ()) if a in ROLES), None)
    return instance_numbers(_inventory_given(ctx), role)


def complete_pair(ctx: Any, incomplete: str) -> list[Candidate]:
    return pair_refs(_inventory_given(ctx))


def complete_playbook(ctx: Any, incomplete: str) -> list[Candidate]:
    return playbook_refs(incomplete)
