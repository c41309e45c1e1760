"""msgspec's validation errors in an operator's words: the whole dotted path to the bad field, dict keys included
(msgspec prints a key as `[...]`), and the value found there, secrets masked.

A model's own check (`__post_init__`) names its field with `field_error("env", "...")`: msgspec only knows the
model it ran in, so the field (or, for a cross-field check, the whole path from the model) rides in the message.
"""

from __future__ import annotations

import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Iterable

import msgspec

_FIELD_MARK = "@"  # field_error's message: "@<path>: <text>"; msgspec keeps a ValueError's text as it is
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\.\.\.\]")


def field_error(path: str, message: str) -> ValueError:
    """The error a model's `__post_init__` raises about its field `path` (dotted, relative to the model)."""
    return ValueError(f"{_FIELD_MARK}{path}: {message}")


def field_errors(problems: list[tuple[str, str]]) -> ValueError:
    """One error for several (path, message) problems of a model's check, each said on its own line."""
    return ValueError("\n".join(f"{_FIELD_MARK}{path}: {message}" for path, message in problems))


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input: where (`names`, the path from the root model, dict keys and list indexes
    as text), what (`problem`) and the value found (`got`: " (got VALUE)", or "" when it is not shown)."""

    names: tuple[str, ...]
    problem: str
    got: str = ""

    @property
    def message(self) -> str:
        return self.problem + self.got

    @property
    def path(self) -> str:
        """The dotted path ("hosts.gpu1.port"), "" for the model as a whole."""
        return ".".join(self.names)

    def __str__(self) -> str:
        return f"{self.path or '(top level)'}: {self.message}"


def validation_problems(err: msgspec.ValidationError, data: Any, root: type, limit: int = 20) -> list[str]:
    """What is wrong with `data` as a `root`, a line each ("path: message"); see `struct_problems`."""
    return [str(p) for p in struct_problems(err, data, root, limit=limit)]


def struct_problems(
    err: msgspec.ValidationError,
    data: Any,
    root: Any,
    *,
    limit: int = 20,
    secrets: Iterable[str] = (),
    at: tuple[str, ...] = (),
) -> list[Problem]:
    """What is wrong with `data` as a `root`: the problem of `err`, then, while it is an unknown field (dropping
    one is harmless), those found converting again without it; msgspec stops at the first. `secrets` (declared
    values) are scrubbed from every message, as is the value of a secret-looking field. `at`: where `data` sits
    in a larger input (the names each problem starts with)."""
    import copy

    known = frozenset(str(s) for s in secrets if s)
    problems = _describe(err, data, root, known, at)
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
            problems += _describe(err, trial, root, known, at)
    return problems


def field_problems(data: dict[str, Any], root: type, *, secrets: Iterable[str] = ()) -> list[Problem]:
    """The problems of each field given in `data`, each converted alone to the type `root` (a Struct or a
    dataclass) declares for it: every field's problem, where converting the whole stops at the first. A name that
    is no field of `root` is left to the caller; a missing field and a model's own check need the whole."""
    if isinstance(root, type) and issubclass(root, msgspec.Struct):
        types = {f.encode_name: f.type for f in msgspec.structs.fields(root)}
    else:
        types = typing.get_type_hints(root, include_extras=True)
    out: list[Problem] = []
    for name, value in data.items():
        if name in types:
            try:
                msgspec.convert(value, types[name], strict=False)
            except msgspec.ValidationError as err:
                out += struct_problems(err, value, types[name], secrets=secrets, at=(name,))
    return out


def _unknown_field(err: msgspec.ValidationError, data: Any, root: type) -> list[Any] | None:
    """The path (keys as in `data`) of the unknown field `err` names, or None for any other problem."""
    text, _, where = str(err).partition(" - at `")
    m = re.fullmatch(r"Object contains unknown field `(.*)`", text)
    if not m:
        return None
    keys, _, _ = _resolve(data, root, where.rstrip("`").removeprefix("$"), raw=True)
    return None if None in keys else keys + [m[1]]


def _describe(
    err: msgspec.ValidationError, data: Any, root: Any, secrets: frozenset[str], at: tuple[str, ...]
) -> list[Problem]:
    """ "hosts.gpu1.port: Expected int <= 65535 (got 70000)" for `err`, raised converting `data` to `root`; a
    model's own check (`field_errors`) may say several."""
    from pdctl.secrets import mask_text
    from pdctl.yamlfile import shown_input

    text, _, where = str(err).partition(" - at `")
    found, value, typ = _resolve(data, root, where.rstrip("`").removeprefix("$"))
    names = [*at, *found]
    shown = True
    if m := re.fullmatch(r"Object contains unknown field `(.*)`", text):
        names, text = names + [m[1]], "unknown field"
        value = value.get(m[1]) if isinstance(value, dict) else None
    elif m := re.fullmatch(r"Object missing required field `(.*)`", text):
        names, text, shown = names + [m[1]], "required field is missing", False
    elif text.startswith(_FIELD_MARK):
        out = []  # field_errors: one "@path: message" a line; the check's message says what it found
        for entry in text[1:].split("\n" + _FIELD_MARK):
            rel, _, said = entry.partition(": ")
            out.append(Problem(tuple(names + rel.split(".")), mask_text(said.replace("`", ""), secrets)))
        return out
    elif text.startswith("Invalid enum value") and (choices := _literal_choices(typ)):
        text = "expected " + _one_of([repr(c) for c in choices])
    scrub = set(secrets)
    got = shown_input(value, names, scrub) if shown and value is not None else ""
    return [Problem(tuple(names), mask_text(text.replace("`", ""), scrub), got)]


def _one_of(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _literal_choices(typ: Any) -> list[Any]:
    """The values a Literal (or the Literals of a union) allows, in declared order."""
    typ = _bare(typ)
    if typing.get_origin(typ) is typing.Literal:
        return list(typing.get_args(typ))
    if typing.get_origin(typ) in (typing.Union, types.UnionType):
        return [c for a in typing.get_args(typ) for c in _literal_choices(a)]
    return []


def _resolve(data: Any, typ: Any, path: str, raw: bool = False) -> tuple[list[Any], Any, Any]:
    """Walk msgspec's error path ("$" removed: ".hosts[...].port", "[3]") through the input and the declared
    types; a `[...]` becomes the first key whose entry does not convert (else whose key does not). Returns the
    names walked (`raw`: the keys and indexes as in `data`, None for a key not found), the input found there
    (None once the input runs out) and the type declared there."""
    names: list[Any] = []
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
    return names, data, typ


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
