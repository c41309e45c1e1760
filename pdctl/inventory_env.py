"""An inventory's env mappings, validated before anything acts on them (a role's env, final-health's expected env)."""

from __future__ import annotations

import re
from typing import Any

from pdctl.struct_errors import field_error

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a shell identifier: the name reaches `env NAME=...` launchers


def env_as_text(v: Any) -> Any:
    """An env mapping as name -> text, validated before anything acts on it: names must be shell identifiers;
    values must be scalars (str, int, float, bool) without a NUL. A list, a mapping, a date or bytes would silently
    become their Python repr, and null (`X:` with nothing after it) an empty value, so they are refused. Booleans
    are `true`/`false`, the spelling SGLang's env parsers (get_bool_env_var, environ.EnvBool) read after
    lowercasing; numbers keep Python's text (1.5, 1e-05). Raises ValueError naming the variable."""
    if not isinstance(v, dict):
        return v
    out = {}
    for k, val in v.items():
        if not isinstance(k, str) or not ENV_NAME.fullmatch(k):
            raise ValueError(
                f"env name {k!r} is not a shell identifier (letters, digits and _, not starting with a digit)"
            )
        if val is None:
            raise ValueError(f'env {k}: null is not a value; write an empty string "" if that is meant')
        if not isinstance(val, (str, int, float, bool)):
            from pdctl.secrets import MASK, is_secret_name

            shown = MASK if is_secret_name(k) else repr(val)[:60]  # a secret's value is never echoed
            raise ValueError(
                f"env {k}: the value must be a string, number or boolean, got "
                f"{type(val).__name__} {shown}; quote it to pass it as text"
            )
        text = ("true" if val else "false") if isinstance(val, bool) else str(val)
        if "\0" in text:
            raise ValueError(f"env {k}: the value contains a NUL character")
        out[k] = text
    return out


def env_field(env: dict[str, Any]) -> dict[str, str]:
    """env_as_text, its error naming the `env` field."""
    try:
        return env_as_text(env)
    except ValueError as e:
        raise field_error("env", str(e)) from None
