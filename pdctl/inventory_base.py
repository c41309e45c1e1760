"""What every inventory model shares: the strict msgspec base (keyword fields, unknown fields refused, `dump`) and
the constrained field types (ports, timeouts, safe names). The models themselves live in inventory.py and, for
hosts, inventory_hosts.py."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

SAFE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$"  # used in file paths, lock dirs and systemd unit names

Port = Annotated[int, Meta(ge=1, le=65535)]
Seconds = Annotated[float, Meta(gt=0, le=7 * 86400)]  # a timeout, never infinite (.inf would wait for ever)
SafeName = Annotated[str, Meta(pattern=SAFE_NAME)]
Cadence = Annotated[float, Meta(gt=0, le=86400)]  # seconds between rounds: positive, at most a day
Interval = Annotated[float, Meta(gt=0, le=3600)]  # seconds between samples: positive, at most an hour


class Strict(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """An inventory model: keyword fields, an unknown field refused."""

    def dump(self, *, exclude_defaults: bool = False) -> dict[str, Any]:
        """The model as plain data (what YAML or JSON would hold); `exclude_defaults` leaves out fields at their
        default, recursively (a tagged model's tag, e.g. a host's `transport`, is always kept)."""
        if not exclude_defaults:
            return msgspec.to_builtins(self)
        return _dump_set(self)


def _dump_set(value: Any) -> Any:
    if isinstance(value, msgspec.Struct):
        config = value.__struct_config__
        out: dict[str, Any] = {}
        if config.tag_field is not None and config.tag is not None:  # the tag says which model: never a default
            out[config.tag_field] = config.tag
        for f in msgspec.structs.fields(value):
            v = getattr(value, f.name)
            default = f.default_factory() if f.default_factory is not msgspec.NODEFAULT else f.default
            if default is msgspec.NODEFAULT or v != default:
                out[f.name] = _dump_set(v)
        return out
    if isinstance(value, dict):
        return {k: _dump_set(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_dump_set(v) for v in value]
    return value
