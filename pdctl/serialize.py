"""One way a typed result becomes JSON data: `to_data(obj)`, for every `--json` document, audit record and report.

Dataclasses serialise field by field (recursively). What a class declares instead of writing its own dict:
- a field with `metadata=JSON_OFF` is left out; `metadata=json_key("samples")` puts it under another key;
- `json_extra` adds computed values: a name, or a (key, attribute path) pair such as ("playbook", "plan.playbook.name")
  (a method found there is called without arguments). A key a field already has is replaced where it stands;
- `json_omit_empty`: these keys (True: every key) are left out when None, "" or {};
- `json_mask`: the attribute path of the secret values scrubbed from the whole document (pdctl.secrets.mask_nested).
Enums give their value, msgspec models their JSON dump, exceptions their first message line.
Anything else unknown becomes its str(), so a JSON document is always produced.
Every string has its URLs' userinfo masked (`pdctl.secrets.mask_urls`: `http://u:***@h`): a password inside a URL
has no secret-looking name to be masked by, and no JSON document, audit record or report carries one.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from operator import attrgetter
from typing import Any

from pdctl.secrets import mask_urls

JSON_OFF = {"json": False}  # dataclasses.field(metadata=JSON_OFF): not part of the JSON document


def json_key(key: str) -> dict[str, str]:
    """dataclasses.field(metadata=json_key("samples")): the field appears under `key` in the JSON document."""
    return {"json_key": key}


def to_data(obj: Any) -> Any:
    """`obj` as JSON-able data (dicts, lists, str, numbers, bools, None). Pure; never raises for an odd value."""
    if isinstance(obj, str) and not isinstance(obj, Enum):
        return mask_urls(obj)
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj.value if isinstance(obj, Enum) else obj
    if isinstance(obj, Enum):
        return to_data(obj.value)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _dataclass_data(obj)
    if isinstance(obj, dict):
        return {str(to_data(k)): to_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_data(v) for v in obj]
    if hasattr(obj, "__struct_fields__"):  # msgspec (the inventory's models)
        import msgspec

        return to_data(msgspec.to_builtins(obj))
    if isinstance(obj, BaseException):
        return mask_urls((str(obj).splitlines() or [type(obj).__name__])[0])
    return mask_urls(str(obj))


def _dataclass_data(obj: Any) -> dict[str, object]:
    out: dict[str, object] = {
        f.metadata.get("json_key", f.name): to_data(getattr(obj, f.name))
        for f in dataclasses.fields(obj)
        if f.metadata.get("json", True)
    }
    for entry in getattr(obj, "json_extra", ()):
        key, path = (entry, entry) if isinstance(entry, str) else entry
        value = attrgetter(path)(obj)
        out[key] = to_data(value() if callable(value) else value)
    omit = getattr(obj, "json_omit_empty", ())
    if omit:
        out = {k: v for k, v in out.items() if not ((omit is True or k in omit) and _is_empty(v))}
    if mask := getattr(obj, "json_mask", None):
        from pdctl.secrets import mask_nested

        out = mask_nested(out, attrgetter(mask)(obj))
    return out


def _is_empty(v: Any) -> bool:
    return v is None or v == "" or v == {}  # 0, False and [] are values
