"""One way a typed result becomes JSON data: `to_data(obj)`, for every `--json` document, audit record and report.

Dataclasses serialise field by field (recursively); a field with `metadata={"json": False}` is left out, and a
class may name computed properties to add in `json_extra` (e.g. ("ok", "headline")). Enums give their value,
pydantic and msgspec models their JSON dump, exceptions their first message line. Anything else unknown becomes its str(), so a
JSON document is always produced.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

JSON_OFF = {"json": False}   # dataclasses.field(metadata=JSON_OFF): not part of the JSON document


def to_data(obj: Any) -> Any:
    """`obj` as JSON-able data (dicts, lists, str, numbers, bools, None). Pure; never raises for an odd value."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj.value if isinstance(obj, Enum) else obj
    if isinstance(obj, Enum):
        return to_data(obj.value)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {f.name: to_data(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.metadata.get("json", True)}
        for name in getattr(obj, "json_extra", ()):
            out[name] = to_data(getattr(obj, name))
        return out
    if isinstance(obj, dict):
        return {str(to_data(k)): to_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_data(v) for v in obj]
    if hasattr(obj, "model_dump"):        # pydantic, without importing it here
        return obj.model_dump(mode="json")
    if hasattr(obj, "__struct_fields__"):  # msgspec (the inventory's models)
        import msgspec

        return msgspec.to_builtins(obj)
    if isinstance(obj, BaseException):
        return (str(obj).splitlines() or [type(obj).__name__])[0]
    return str(obj)
