"""The audit log's reading side, what `pdctl history` asks: the log's lines as records (a line that is not a JSON
object is a CorruptLine, never a crash), a record's result in a word (ok, failed, refused, unreachable, usage,
interrupted, unfinished, taken over: what history shows and `--result` matches, the exit code recorded with an
error deciding it), and the queries by action, result, inventory and time. Pure but for reading the log and, for
the inventory filter, the inventory files records name."""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple, Optional, Union

from pdctl.audit.writer import STARTED, _load_inventory, inventory_name_of
from pdctl.errors import EXIT_KINDS, UsageError, exit_kind

# -- the log's lines ---------------------------------------------------------------------------------------------------

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
    dict: "a JSON object",
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
    for key, want, optional in _FIELD_TYPES:
        value = data.get(key)
        if key in data and not (value is None and optional) and not _is(value, want):
            kind = _JSON_KIND.get(type(value), "JSON")
            return CorruptLine(lineno, text, f"field {key!r} is {kind}, not {_WANT_KIND[want]}")
    return data


# The fields the reader matches, hashes, compares or shows, with the type every writer gives them (optional: null
# allowed). A record holding another type is damage (a hand edit, another tool): a CorruptLine naming the field,
# so no reader meets a list where it hashes a run id or compares a time.
_FIELD_TYPES: tuple[tuple[str, type, bool], ...] = (
    ("time", str, False),
    ("operator", str, False),
    ("inventory", str, False),
    ("action", str, False),
    ("result", str, False),
    ("deployment", str, True),
    ("run", str, True),
    ("playbook_run", str, True),
    ("exit_code", int, True),
)
_WANT_KIND = {str: "a string", int: "an integer"}


def _is(value: Any, want: type) -> bool:
    return isinstance(value, want) and not (want is int and isinstance(value, bool))  # JSON true is no exit code


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
    """The --json form of a line: the record itself, or {"corrupt": text, "reason": why}; a URL's password masked
    (records written before URLs were masked on write still hold them)."""
    from pdctl.secrets import mask_nested

    return mask_nested({"corrupt": line.text, "reason": line.reason} if isinstance(line, CorruptLine) else line)


# -- a record's result in a word ---------------------------------------------------------------------------------------


RESULT_WORDS = (
    "ok",
    "failed",
    "refused",
    "unreachable",
    "usage",
    "interrupted",
    "unfinished",
    "taken over",
    "unrecorded",
)


class ResultWord(NamedTuple):
    word: str  # one of RESULT_WORDS
    detail: str  # the rest of the result, without the word repeated ("" when nothing is left)


_CLASS_WORD = {
    "RefusedError": "refused",
    "LockHeld": "refused",
    "HazardRefused": "refused",
    "HostKeyRefused": "refused",
    "UnreachableError": "unreachable",
    "UsageError": "usage",
    "InventoryError": "usage",
    "PlaybookError": "usage",
    "KeyboardInterrupt": "interrupted",
}
_CLASS_PREFIX = re.compile(r"^([A-Z][A-Za-z0-9_]*): ?(.*)$", re.S)
# a "watch heal" record of a pdctl before heals recorded their end: written before acting, so it holds no outcome
_HEAL_BEFORE_ENDS = re.compile(r"^evidence recorded; running `pdctl ([^`]+)`$")


def result_word(record: dict[str, Any]) -> ResultWord:
    """(word, detail) for an audit record's result, whatever the action wrote ("ok", "passed", "HazardRefused:
    refused: ...", "failed at step 2 ...", "final-health failed"); the record's `exit_code` decides the word when
    the text alone does not, and over an error's class (a StepFailed of exit 3 is unreachable); an exit code of 0 is
    ok. A text it does not know, with no exit code, is "failed" (an action that ends normally writes "ok"), but a
    record that says nothing of how its action ended is "unrecorded", never "failed". Pure."""
    res = str(record.get("result", "")).strip()
    code = record.get("exit_code")
    if isinstance(code, bool):  # JSON true/false is no exit code
        code = None
    low = res.lower()
    if low in ("ok", "passed", "pass"):
        return ResultWord("ok", "")
    if not res and not isinstance(code, int):  # a record that says nothing of how it ended: never "failed"
        return ResultWord("unrecorded", "the record holds no result")
    old_heal = _HEAL_BEFORE_ENDS.match(res) if not isinstance(code, int) else None
    if old_heal:  # its outcome is in the record of the action it ran, written next
        return ResultWord("unrecorded", f"{res}: its outcome is in that `{old_heal.group(1)}` record, next")
    if low == STARTED:  # its end is not in the log (fold_runs drops the started records of finished runs)
        return ResultWord("unfinished", "started, no end recorded: killed, or still running")
    if low.startswith("taken over"):  # a "lock takeover" record
        return ResultWord("taken over", res[len("taken over") :].lstrip(" :"))
    if low.startswith("interrupted"):
        return ResultWord("interrupted", res[len("interrupted") :].lstrip(" :"))
    m = _CLASS_PREFIX.match(res)
    if m:  # "ErrorClass: message", as `audited` writes an exception
        cls, rest = m.group(1), m.group(2)
        # the exit code recorded with the error decides (StepFailed: unreachable when a host did not answer)
        word = EXIT_KINDS.get(code) if isinstance(code, int) else None
        word = (
            word
            or _CLASS_WORD.get(cls)
            or (
                "refused"
                if cls.endswith("Refused")
                else "unreachable"
                if ("Unreachable" in cls or "Timeout" in cls or "Connection" in cls)
                else "failed"
            )
        )
        if rest.lower().startswith(word + ":"):
            rest = rest[len(word) + 1 :]
        return ResultWord(word, rest.strip())
    word = ("ok" if code == 0 else exit_kind(code)) if isinstance(code, int) else "failed"
    if low.startswith("failed"):
        return ResultWord(word, res[len("failed") :].lstrip(" :"))
    if low == "error":
        return ResultWord(word, "")
    return ResultWord(word, res)


# -- querying ----------------------------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class InventoryFilter:
    """The records of one inventory: of the file `source` (its path, as given or resolved), or of the deployment
    called `name` (a record's `deployment`; in a record written before it existed, `inventory_name` of playbook
    runs, else the name in the file the record names). With both, the deployment `name` whose inventory is
    `source`: its records through any copy of the file, and the older ones through `source` itself."""

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
        """`name_of` names the file an older record names (pass one that answers None to match those by path)."""
        rec = str(record.get("inventory", ""))
        deployment = record.get("deployment")
        if self.name is not None and isinstance(deployment, str):  # what its writer read: no file read again
            return deployment == self.name
        if self.source is not None and (rec == self.source or _same_path(rec, self.source)):
            return True
        if self.name is None:
            return False
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
    ended = {run_id(x) for x in out if isinstance(x, dict) and run_id(x) and x.get("result") != STARTED}
    return [x for x in out if not (isinstance(x, dict) and x.get("result") == STARTED and run_id(x) in ended)]


def run_id(record: Record) -> Optional[str]:
    """The record's run id, or None when it has none or a `run` that is no string (a hand-edited or damaged
    record: read as having no run, so it is shown by itself, never folded into another, never a crash)."""
    run = record.get("run")
    return run if isinstance(run, str) and run else None
