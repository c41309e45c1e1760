"""`${...}` substitution in step args and `when`, from the inventory, the playbook's vars and `--var k=v`.

Names: `inventory.FIELD` (any inventory field: `inventory.name`, `inventory.served_model_name`), `roles.ROLE.I.FIELD`
(`roles.decode.0.port`), `hosts.NAME.FIELD`, `vars.NAME` or just `NAME` (playbook vars overridden by --var), and
`apply` (true with --apply). A string that is exactly one `${x}` keeps the value's type (a port stays an int); inside
a longer string the value is inserted as text (a shell command's text is not filled in here: `shell_refs` passes its
values as environment variables). `$${` is a literal `${`. Pure functions; unknown names raise VarError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Union

from pdctl.playbook.outcome import Data

if TYPE_CHECKING:
    from pdctl.inventory import Inventory

#: a `--var` value as `cli_scalar` reads it
Scalar = Union[bool, int, float, str]

REF = re.compile(r"\$\$\{|\$\{([^{}]*)\}")


class VarError(ValueError):
    """An unknown or unusable `${name}`."""


_INT = re.compile(r"[+-]?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[+-]?(?:(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)")


def cli_scalar(text: str) -> Scalar:
    """A `--var` value as the operator means it: `10` -> 10, `1e3`/`.5` -> float, `true`/`false` -> bool, anything
    else the text as given. Not YAML's reading, which turns `1:30` into 90, `0x10` into 16, `0777` into 511, `yes`
    and `on` into true, a date into a date, and `1e3` into text. Pure."""
    t = text.strip()
    if _INT.fullmatch(t):
        return int(t)
    if _FLOAT.fullmatch(t):
        return float(t)
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    return text


def parse_cli_vars(items: list[str] | None, option: str = "--var", *, secret: bool = False) -> dict[str, Scalar]:
    """`["k=v", ...]` -> {k: v}, each value read by `cli_scalar` (10 -> int, true -> bool, text -> str), except a
    secret's (`secret`: --secret-var, or a secret-looking name), which is the text exactly as given. Raises
    ValueError naming `option` and the var, never the value (it may be a secret)."""
    from pdctl.secrets import is_secret_name

    out: dict[str, Scalar] = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"{option} {item!r}: expected NAME=VALUE")
        k, v = item.split("=", 1)
        k = k.strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            raise ValueError(f"{option} {k!r}=...: {k!r} is not a valid name")
        if k == "apply":
            raise ValueError(f"{option} apply=...: use the --apply flag")
        out[k] = v if secret or is_secret_name(k) else cli_scalar(v)
    return out


def show_value(v: object) -> str:
    """A value as the operator wrote it: 6 not 6.0 (a float arg model turns 6 into 6.0), true/false not
    True/False, text as is."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return str(v)


@dataclass(frozen=True)
class Scope:
    """The names `${...}` can reach: `inventory.*` (and its `roles.*`, `hosts.*`), `apply`, and the run's vars as
    `vars.NAME` or just `NAME` (an inventory name wins over a var of the same name)."""

    inventory: dict[str, Data]  # the inventory as plain data (Inventory.dump())
    vars: dict[str, Data]  # the playbook's vars, each overridden by a --var
    apply: bool

    def names(self) -> dict[str, Data]:
        """The top level of every `${...}` path."""
        inv = self.inventory
        base = {"inventory": inv, "roles": inv["roles"], "hosts": inv["hosts"], "apply": self.apply}
        return {**self.vars, **base, "vars": self.vars}


def build_scope(inv: Inventory, playbook_vars: Mapping[str, Data], cli_vars: Mapping[str, Data], apply: bool) -> Scope:
    """The names `${...}` can reach. Playbook var defaults may themselves use inventory names."""
    bare = Scope(inv.dump(), {}, apply)
    resolved = {k: substitute(v, bare) for k, v in playbook_vars.items()}
    resolved.update(cli_vars)
    return Scope(bare.inventory, resolved, apply)


def lookup(name: str, scope: Scope) -> Data:
    """The value `${name}` stands for. Raises VarError naming what is there instead."""
    parts = [p for p in name.strip().split(".")]
    if not parts or not all(parts):
        raise VarError(f"${{{name}}}: empty name")
    top = scope.names()
    cur: Data = top
    for i, p in enumerate(parts):
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            at = ".".join(parts[:i]) or "(top)"
            if i == 0:
                known = sorted(k for k in top if k != "vars")
                raise VarError(
                    f"${{{name}}}: unknown variable {p!r} (known: {', '.join(known)}; pass --var NAME=VALUE to set one)"
                )
            options = (
                ", ".join(map(str, cur))
                if isinstance(cur, dict)
                else f"0..{len(cur) - 1}"
                if isinstance(cur, list)
                else type(cur).__name__
            )
            raise VarError(f"${{{name}}}: {at} has no {p!r} (has: {options})")
    return cur


def as_text(v: Data) -> str:
    """A value inserted into a longer string: true/false for a bool, else str()."""
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def substitute(value: Data, scope: Scope) -> Data:
    """`value` with every `${name}` replaced (recursively in lists and dicts). Raises VarError."""
    if isinstance(value, dict):
        return {k: substitute(v, scope) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, scope) for v in value]
    if not isinstance(value, str) or "$" not in value:
        return value
    whole = REF.fullmatch(value)
    if whole and whole.group(1) is not None:
        return lookup(whole.group(1), scope)

    def one(m: re.Match) -> str:
        return "${" if m.group(1) is None else as_text(lookup(m.group(1), scope))

    return REF.sub(one, value)


def truthy(when: str, scope: Scope) -> bool:
    """`apply` / `not apply` / any var name, as a boolean (strings: true/yes/1/on)."""
    w = when.strip()
    neg = w.startswith("not ")
    v = lookup(w[4:].strip() if neg else w, scope)
    if isinstance(v, str):
        v = v.strip().lower() in ("1", "true", "yes", "on")
    return (not bool(v)) if neg else bool(v)


def referenced_vars(texts: list[str]) -> set[str]:
    """The variable names `${NAME}` / `${vars.NAME}` in `texts` (inventory paths such as `${roles.decode.0.port}`
    come out as their first part, which is no var name). Pure."""
    out = set()
    for text in texts:
        for m in REF.finditer(text):
            if m.group(1) is None:
                continue
            parts = m.group(1).strip().split(".")
            out.add(parts[1] if parts[0] == "vars" and len(parts) > 1 else parts[0])
    return out


def unknown_cli_vars(cli_vars: Mapping[str, Data], declared: Mapping[str, Data], texts: list[str]) -> list[str]:
    """The --var names the playbook neither declares (`vars:`) nor uses (`${NAME}`): a misspelt name would
    otherwise be accepted and the default run (e.g. the seed's full 90 x 20k storm). Pure."""
    used = referenced_vars(texts)
    return sorted(k for k in cli_vars if k not in declared and k not in used)


def set_by(raw: Mapping[str, Data], field_path: str) -> str:
    """ " (set by ${storm_requests})" when the step arg or gate key a problem names (`args.requests`,
    `gate.exit_code`) was one var in `raw` (the step's args or gate as written): the operator set it with --var,
    and looks for that name. Pure."""
    _, _, key = field_path.partition(".")
    ref = raw.get(key) if key else None
    m = re.fullmatch(r"\$\{([^{}]+)\}", ref.strip()) if isinstance(ref, str) else None
    return f" (set by ${{{m.group(1)}}})" if m else ""
