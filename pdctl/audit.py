"""The audit log: one JSON line per mutating action or playbook run, appended under an exclusive file lock.

Records never carry secrets: callers pass env through `pdctl.secrets.mask_env` first, and `append` masks again any
mapping under a key named "env" as a last line of defence.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from pdctl import state


def _mask_nested(obj: Any) -> Any:
    from pdctl.secrets import mask_env, mask_text

    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k == "env" and isinstance(v, dict):
                out[k] = mask_env({str(a): str(b) for a, b in v.items()})
            else:
                out[k] = _mask_nested(v)
        return out
    if isinstance(obj, list):
        return [_mask_nested(v) for v in obj]
    if isinstance(obj, str):
        return mask_text(obj)   # SECRET=value or --api-key value inside an error message or a log tail
    return obj


def append(action: str, *, inventory: str, args: dict[str, Any] | None = None, result: str,
           started: float, extra: dict[str, Any] | None = None, path: Path | None = None) -> dict[str, Any]:
    """Append one record and return it. Safe with concurrent writers (flock + a single write of one line)."""
    now = time.time()
    record = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now)),
        "operator": state.operator(),
        "inventory": inventory,
        "action": action,
        "args": _mask_nested(args or {}),
        "result": result,
        "duration_s": round(now - started, 3),
    }
    if extra:
        record.update(_mask_nested(extra))
    record["result"] = _mask_nested(record["result"])
    line = (json.dumps(record, sort_keys=False, default=str) + "\n").encode()
    p = path or state.audit_log_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    return record


class Audited:
    """What an audited action fills in while it runs: its result line and extra fields for the record."""

    def __init__(self) -> None:
        self.result = "error"
        self.extra: dict[str, Any] = {}


@contextmanager
def audited(action: str, *, inventory: str, args: dict[str, Any]) -> Iterator[Audited]:
    """Append exactly one record for `action` however it ends: the result the action set, the error that stopped
    it (refusals included), or "interrupted"."""
    started = time.time()
    rec = Audited()
    try:
        yield rec
    except KeyboardInterrupt:
        rec.result = "interrupted"
        raise
    except Exception as e:
        msg = getattr(e, "message", None) or str(e) or "no message"
        rec.result = f"{type(e).__name__}: {msg.splitlines()[0]}"
        raise
    finally:
        append(action, inventory=inventory, args=args, result=rec.result, started=started, extra=rec.extra)


def read(path: Path | None = None) -> Iterator[dict[str, Any]]:
    """Records oldest first. A line that is not valid JSON is yielded as {"corrupt": line} rather than dropped."""
    p = path or state.audit_log_path()
    if not p.exists():
        return
    with open(p, "rb") as f:
        for raw in f:
            raw = raw.strip()
            if not raw:
                continue
            try:
                yield json.loads(raw)
            except json.JSONDecodeError:
                yield {"corrupt": raw.decode(errors="replace")}
