"""The audit log: one JSON line per mutating action or playbook run, appended under an exclusive file lock, and
the queries `pdctl history` answers (read; filter by action, result, inventory and time; the last N). A result in
a word is pdctl.audit_result.

Records never carry secrets: callers pass env through `pdctl.secrets.mask_env` first, and `append` masks again any
mapping under a key named "env" as a last line of defence.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional, Union

from pdctl import state
from pdctl.audit_result import RESULT_WORDS, STARTED, result_word  # noqa: F401 (callers use audit.*)
from pdctl.errors import ExitCode, InventoryError, PdctlError, UsageError


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
        return mask_text(obj)  # SECRET=value or --api-key value inside an error message or a log tail
    return obj


def _open_for_append(p: Path) -> int:
    """An fd open for appending to the log at `p`, or UsageError naming it. O_NONBLOCK so a FIFO in its place
    cannot hang us even if one replaces the file between the check and the open."""
    try:
        mode = os.stat(p).st_mode
    except OSError:
        mode = None  # missing (created below) or unreadable (the open says why)
    if mode is not None and not stat.S_ISREG(mode):
        raise UsageError(f"audit log {p}: not a regular file ({_kind(mode)})", hint=_UNWRITABLE_HINT)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise UsageError(f"audit log {p}: cannot be written ({e.strerror or e})", hint=_UNWRITABLE_HINT) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(
                f"audit log {p}: not a regular file ({_kind(os.fstat(fd).st_mode)})", hint=_UNWRITABLE_HINT
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _kind(mode: int) -> str:
    return (
        "a directory"
        if stat.S_ISDIR(mode)
        else "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a file"
    )


_UNWRITABLE_HINT = "every mutating action is recorded first: fix that path, or point PDCTL_AUDIT_LOG at a writable file"


def check_writable(path: Path | None = None) -> Path:
    """Raise UsageError (exit 2) naming the log unless it can be appended to; creates it (empty) if missing."""
    p = path or state.audit_log_path()
    os.close(_open_for_append(p))
    return p


def append(
    action: str,
    *,
    inventory: str,
    args: dict[str, Any] | None = None,
    result: str,
    started: float,
    extra: dict[str, Any] | None = None,
    path: Path | None = None,
) -> dict[str, Any]:
    """Append one record and return it. Safe with concurrent writers (flock + a single write of one line).
    Raises UsageError naming the log when it cannot be written (missing directory made, FIFO or directory refused)."""
    now = time.time()
    record = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now)),
        "operator": state.operator(),
        # a path as an absolute one: `history -i` from another directory must find (and not mistake) it
        "inventory": inventory if not inventory or inventory.startswith("<") else os.path.abspath(inventory),
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
    fd = _open_for_append(p)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line)
    except OSError as e:  # e.g. a full disk
        raise UsageError(f"audit log {p}: cannot be written ({e.strerror or e})", hint=_UNWRITABLE_HINT) from None
    finally:
        os.close(fd)  # closing drops the flock
    return record


class Audited:
    """What an audited action fills in while it runs: its result line and extra fields for the record. `run`
    is the id shared by the action's "started" record and its final one."""

    def __init__(self) -> None:
        self.result = "error"
        self.extra: dict[str, Any] = {}
        self.run = uuid.uuid4().hex[:12]


@contextmanager
def audited(
    action: str,
    *,
    inventory: str,
    args: dict[str, Any],
    mark_start: bool = False,
    states: Callable[[], Any] | None = None,
) -> Iterator[Audited]:
    """Append one final record for `action` however it ends: the result the action set, the error that stopped
    it (refusals included), or "interrupted by SIGTERM" (the signal named when the interrupt carries one).

    Before the action runs, the log is checked writable (UsageError naming it otherwise, so nothing is done
    that cannot be recorded); with `mark_start` a "started" record with the same `run` id is appended first,
    so a run killed outright (kill -9) leaves a record with no end. On an interrupt, `states()` (best effort)
    goes into the record as "roles": what state the action left them in."""
    started = time.time()
    rec = Audited()
    try:
        if mark_start:
            append(action, inventory=inventory, args=args, result=STARTED, started=started, extra={"run": rec.run})
        else:
            check_writable()
    except UsageError as e:
        raise UsageError(f"{e.message}: refusing to {action} (nothing was done)", hint=e.hint) from None
    failed = True
    try:
        yield rec
        failed = False
    except KeyboardInterrupt as e:
        sig = getattr(e, "signal_name", None)
        rec.result = f"interrupted by {sig}" if sig else "interrupted"
        rec.extra["exit_code"] = ExitCode.INTERRUPTED
        if states is not None:
            try:
                rec.extra["roles"] = states()
            except Exception as err:  # the host may be what hung: the interrupt is still recorded
                rec.extra["roles"] = f"unknown: {getattr(err, 'message', None) or err}"
        raise
    except Exception as e:
        msg = getattr(e, "message", None) or str(e) or "no message"
        rec.result = f"{type(e).__name__}: {msg.splitlines()[0]}"
        # the CLI's exit code for it, which decides the result word (a StepFailed that got no answer is exit 3)
        rec.extra["exit_code"] = e.exit_code if isinstance(e, PdctlError) else ExitCode.CHECK_FAILED
        raise
    finally:
        rec.extra["run"] = rec.run
        try:
            append(action, inventory=inventory, args=args, result=rec.result, started=started, extra=rec.extra)
        except UsageError:
            if not failed:  # else the action's own error is the one to report
                raise


# -- reading --------------------------------------------------------------------------------------------------------

Record = dict[str, Any]


@dataclass(frozen=True)
class CorruptLine:
    """A line of the log that is no record: its line number (1-based), its text (bytes that are not UTF-8 shown
    as U+FFFD) and why it is not a record."""

    lineno: int
    text: str
    reason: str


AuditLine = Union[Record, CorruptLine]

_JSON_KIND = {
    list: "a JSON array",
    str: "a JSON string",
    int: "a JSON number",
    float: "a JSON number",
    bool: "a JSON boolean",
    type(None): "JSON null",
}


def parse_line(raw: bytes, lineno: int) -> Optional[AuditLine]:
    """One line of the log: its record, a CorruptLine, or None for a blank line. Pure; never raises."""
    raw = raw.strip()
    if not raw:
        return None
    text = raw.decode(errors="replace")
    try:
        data = json.loads(raw.decode())  # decoded strictly: bytes that are not UTF-8 are damage, not a record
    except UnicodeDecodeError as e:
        return CorruptLine(lineno, text, f"not UTF-8 (byte {e.start + 1})")
    except json.JSONDecodeError as e:
        return CorruptLine(lineno, text, f"not valid JSON: {e.msg} (column {e.colno})")
    except (ValueError, RecursionError) as e:  # e.g. an integer too long, arrays nested thousands deep
        return CorruptLine(lineno, text, f"not valid JSON: {type(e).__name__}")
    if not isinstance(data, dict):
        return CorruptLine(lineno, text, f"{_JSON_KIND.get(type(data), 'JSON')}, not an object")
    return data


def read_records(path: Path) -> list[AuditLine]:
    """Every line of the log at `path`, oldest first: records, and corrupt lines in their place rather than
    dropped (blank lines skipped). A missing log has no lines. Raises UsageError (exit 2, naming the path) when the
    log cannot be read or is no regular file (a FIFO would block, /dev/zero never end); streamed, so no size cap."""
    from pdctl.safe_read import open_regular

    if not path.exists():
        return []
    try:
        fd = open_regular(path, UsageError, "audit log", limit=None)
    except UsageError as e:
        raise UsageError(
            e.message,
            hint="the audit log is $PDCTL_AUDIT_LOG when set, else audit.jsonl in pdctl's "
            "state directory; point it at a regular file",
        ) from None
    with os.fdopen(fd, "rb") as f:
        lines = (parse_line(raw, n) for n, raw in enumerate(f, start=1))
        return [x for x in lines if x is not None]


def line_json(line: AuditLine) -> dict[str, Any]:
    """The --json form of a line: the record itself, or {"corrupt": text}."""
    return {"corrupt": line.text} if isinstance(line, CorruptLine) else line


# -- querying -------------------------------------------------------------------------------------------------------


def matches_action(record: Record, action: str) -> bool:
    """The record is of `action` exactly ('run final-health') or `action` is its first word(s) ('run')."""
    got = record.get("action", "")
    return got == action or str(got).startswith(action + " ")


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
    return not got.is_absolute() and ".." not in parts and bool(parts) and list(want.parts[-len(parts) :]) == parts


def _load_inventory(path: str | os.PathLike):
    from pdctl.inventory import load_inventory  # lazy: the models are not needed to append a record

    try:
        return load_inventory(path)
    except UnicodeDecodeError:  # the YAML loader reads text and lets this one through
        raise InventoryError(f"{path}: cannot read inventory: not UTF-8 text") from None


def inventory_name_of(path: str) -> Optional[str]:
    """The name of the inventory a record names by its path, through the inventory loader (None when the file
    is gone or no longer loads; the embedded default is "local"). Reads the file; never raises."""
    if not path or path.startswith("<"):
        return "local" if path == "<embedded default>" else None
    try:
        return _load_inventory(path).name
    except UsageError:
        return None


@dataclass(frozen=True)
class InventoryFilter:
    """The records of one inventory: of the file `source` (its path, as given or resolved), or of the inventory
    called `name` (`inventory_name` of playbook runs, else the name in the file the record names)."""

    source: Optional[str] = None
    name: Optional[str] = None

    @classmethod
    def resolve(cls, given: str) -> "InventoryFilter":
        """`given` as the operator typed it: an existing file (which must load: InventoryError otherwise, as
        everywhere), a path of a file since removed (has a "/" or ends in .yaml/.yml), else an inventory's name."""
        if Path(given).exists():
            _load_inventory(given)
            return cls(source=given)
        if "/" in given or given.endswith((".yaml", ".yml")):
            return cls(source=given)
        return cls(name=given)

    def matches(self, record: Record, name_of: Callable[[str], Optional[str]] = inventory_name_of) -> bool:
        rec = str(record.get("inventory", ""))
        if self.source is not None:
            return rec == self.source or _same_path(rec, self.source)
        rec_name = record.get("inventory_name")
        return rec == self.name or (rec_name if rec_name is not None else name_of(rec)) == self.name


_AGO = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_when(text: str, *, option: str = "--since", now: Optional[float] = None) -> datetime:
    """A point in time as the operator gives it: an ISO time ("2025-01-01T10:00", "2025-01-01 10:00:00+02:00",
    "2025-01-01"; without an offset: local time) or a time ago ("90s", "30m", "2h", "1d"). Raises UsageError
    naming `option` otherwise."""
    m = _AGO.match(text.strip().lower())
    if m:
        ago = float(m.group(1)) * _UNIT_S[m.group(2)]
        return datetime.fromtimestamp((time.time() if now is None else now) - ago).astimezone()
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"{option} {text!r}: not a time", hint="give an ISO time (2025-01-01T10:00) or a time ago: 30m, 2h, 1d"
        ) from None
    return when if when.tzinfo else when.astimezone()  # naive: the operator's local time


def record_time(record: Record) -> Optional[datetime]:
    """When the record was written (its `time` field), or None when it has none that parses."""
    try:
        return datetime.strptime(str(record.get("time")), "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return None


def _in_time(record: Record, since: Optional[datetime], until: Optional[datetime]) -> bool:
    at = record_time(record)
    if at is None:  # undated: nobody can say it is outside the range, as for a corrupt line
        return True
    return (since is None or at >= since) and (until is None or at <= until)


def query(
    lines: Iterable[AuditLine],
    *,
    action: Optional[str] = None,
    result: Optional[str] = None,
    inventory: Union[str, InventoryFilter, None] = None,
    since: Optional[datetime] = None,
    until: Optional[datetime] = None,
    limit: Optional[int] = None,
    name_of: Callable[[str], Optional[str]] = inventory_name_of,
) -> list[AuditLine]:
    """The lines that match every filter given, oldest first, at most the last `limit`.

    `action`: see matches_action. `result`: one of RESULT_WORDS, the record's result in a word (result_word;
    UsageError for another word). `since`/`until`: the record's `time` in that range, both ends included (see
    parse_when). `inventory`: an InventoryFilter, or what the operator typed (see InventoryFilter.resolve; raises
    InventoryError for a file that does not load). `name_of` names the inventory file a record names (read once
    per file per query). Corrupt lines (and records without a time, for the time filter) pass every filter, since
    nobody can say what they were, but when only corrupt lines are left nothing matched and the answer is empty."""
    if limit is not None and limit < 1:
        raise UsageError(f"the number of records must be at least 1, got {limit}")
    if result is not None and result.lower() not in RESULT_WORDS:
        raise UsageError(f"--result {result!r}: not a result", hint="one of: " + ", ".join(RESULT_WORDS))
    out = list(lines)
    filtered = False
    if action:
        out = [x for x in out if isinstance(x, CorruptLine) or matches_action(x, action)]
        filtered = True
    if result is not None:
        out = [x for x in out if isinstance(x, CorruptLine) or result_word(x).word == result.lower()]
        filtered = True
    if since is not None or until is not None:
        out = [x for x in out if isinstance(x, CorruptLine) or _in_time(x, since, until)]
        filtered = True
    if inventory is not None:
        want = inventory if isinstance(inventory, InventoryFilter) else InventoryFilter.resolve(inventory)
        names: dict[str, Optional[str]] = {}

        def cached(path: str) -> Optional[str]:  # a log names the same few files over and over
            if path not in names:
                names[path] = name_of(path)
            return names[path]

        out = [x for x in out if isinstance(x, CorruptLine) or want.matches(x, cached)]
        filtered = True
    if filtered and all(isinstance(x, CorruptLine) for x in out):
        return []
    return out[-limit:] if limit is not None else out


def fold_runs(lines: Iterable[AuditLine]) -> list[AuditLine]:
    """The lines without the "started" records whose run has its final record among `lines`: a run shows once,
    by its end; a started record left alone is a run that never finished (killed, or still running). Pure."""
    out = list(lines)
    ended = {x.get("run") for x in out if isinstance(x, dict) and x.get("run") and x.get("result") != STARTED}
    return [x for x in out if not (isinstance(x, dict) and x.get("result") == STARTED and x.get("run") in ended)]
