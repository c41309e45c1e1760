"""msgspec's validation errors in an operator's words: the whole dotted path to the bad field, dict keys included
(msgspec prints a key as `[...]`), and the value found there, secrets masked.

A model's own check (`__post_init__`) names its field with `field_error("env", "...")`: msgspec only knows the
model it ran in, so the field (or, for a cross-field check, the whole path from the model) rides in the message.
"""

from __future__ import annotations

import re
import typing
from typing import Any

import msgspec

_FIELD_MARK = "@"  # field_error's message: "@<path>: <text>"; msgspec keeps a ValueError's text as it is
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\.\.\.\]")


def field_error(path: str, message: str) -> ValueError:
    """The error a model's `__post_init__` raises about its field `path` (dotted, relative to the model)."""
    return ValueError(f"{_FIELD_MARK}{path}: {message}")


def field_errors(problems: list[tuple[str, str]]) -> ValueError:
    """One error for several (path, message) problems of a model's check, each said on its own line."""
    return ValueError("\n".join(f"{_FIELD_MARK}{path}: {message}" for path, message in problems))


def validation_problems(err: msgspec.ValidationError, data: Any, root: type, limit: int = 20) -> list[str]:
    """What is wrong with `data` as a `root`, a line each: the problem of `err`, then, while it is an unknown field
    (dropping one is harmless), those found converting again without it; msgspec stops at the first."""
    import copy

    problems = [describe_validation_error(err, data, root)]
    trial = copy.deepcopy(data)
    while len(problems) < limit and (names := _unknown_field(err, trial, root)):
        parent = trial
        for name in names[:-1]:
            parent = parent[int(name)] if isinstance(parent, list) else parent[name]
        del parent[names[-1]]
        try:
            msgspec.convert(trial, root, strict=False)
            break
        except msgspec.ValidationError as e:
            err = e
            problems.append(describe_validation_error(err, trial, root))
    return problems


def _unknown_field(err: msgspec.ValidationError, data: Any, root: type) -> list[Any] | None:
    """The path (keys as in `data`) of the unknown field `err` names, or None for any other problem."""
    text, _, where = str(err).partition(" - at `")
    m = re.fullmatch(r"Object contains unknown field `(.*)`", text)
    if not m:
        return None
    keys, _ = _resolve(data, root, where.rstrip("`").removeprefix("$"), raw=True)
    return None if None in keys else keys + [m[1]]


def describe_validation_error(err: msgspec.ValidationError, data: Any, root: type) -> str:
    """ "hosts.gpu1.port: Expected int <= 65535 (got 70000)" for `err`, raised converting `data` to `root`."""
    from pdctl.yamlfile import shown_input

    text, _, where = str(err).partition(" - at `")
    names, value = _resolve(data, root, where.rstrip("`").removeprefix("$"))
    shown = True
    if m := re.fullmatch(r"Object contains unknown field `(.*)`", text):
        names, text = names + [m[1]], "unknown field"
        value = value.get(m[1]) if isinstance(value, dict) else None
    elif m := re.fullmatch(r"Object missing required field `(.*)`", text):
        names, text, shown = names + [m[1]], "required field is missing", False
    elif text.startswith(_FIELD_MARK):
        from pdctl.secrets import mask_text

        lines = []  # field_errors: one "@path: message" a line
        for entry in text[1:].split("\n" + _FIELD_MARK):
            rel, _, said = entry.partition(": ")
            lines.append(f"{'.'.join(names + rel.split('.'))}: {mask_text(said.replace('`', ''), set())}")
        return "\n  ".join(lines)  # the check's message says what it found
    scrub: set[str] = set()
    got = shown_input(value, names, scrub) if shown and value is not None else ""
    from pdctl.secrets import mask_text

    return f"{'.'.join(names) or '(top level)'}: {mask_text(text.replace('`', ''), scrub)}{got}"


def _resolve(data: Any, typ: Any, path: str, raw: bool = False) -> tuple[list[Any], Any]:
    """Walk msgspec's error path ("$" removed: ".hosts[...].port", "[3]") through the input and the declared
    types; a `[...]` becomes the first key whose entry does not convert (else whose key does not). Returns the
    names walked (`raw`: the keys and indexes as in `data`, None for a key not found) and the input found there
    (None once the input runs out)."""
    names: list[str] = []
    for step in _STEP.finditer(path):
        typ = _bare(typ)
        if step[1] is not None:  # .field of a model
            fields = {f.encode_name: f.type for f in msgspec.structs.fields(typ)} if _is_struct(typ) else {}
            names.append(step[1])
            typ = fields.get(step[1], Any)
            data = data.get(step[1]) if isinstance(data, dict) else None
        elif step[2] is not None:  # [i] of a list
            i = int(step[2])
            names.append(i if raw else str(i))
            args = typing.get_args(typ)
            typ = args[0] if args else Any
            data = data[i] if isinstance(data, list) and i < len(data) else None
        else:  # [...]: a key msgspec does not print
            key_t, val_t = (typing.get_args(typ) + (Any, Any))[:2]
            key = _failing_key(data, key_t, val_t) if isinstance(data, dict) else None
            names.append(key if raw else "?" if key is None else str(key))
            typ, data = val_t, (data.get(key) if key is not None else None)
    return names, data


def _failing_key(mapping: dict, key_t: Any, val_t: Any) -> Any:
    for convert_t, pick in ((val_t, lambda k, v: v), (key_t, lambda k, v: k)):
        for k, v in mapping.items():
            try:
                msgspec.convert(pick(k, v), convert_t, strict=False)
            except msgspec.ValidationError:
                return k
    return None


def _bare(typ: Any) -> Any:
    """`typ` without Annotated[...] and Optional[...]."""
    while True:
        origin = typing.get_origin(typ)
        if origin is typing.Annotated:
            typ = typing.get_args(typ)[0]
        elif origin is typing.Union and sum(a is not type(None) for a in typing.get_args(typ)) == 1:
            typ = next(a for a in typing.get_args(typ) if a is not type(None))
        else:
            return typ


def _is_struct(typ: Any) -> bool:
    return isinstance(typ, type) and issubclass(typ, msgspec.Struct)
