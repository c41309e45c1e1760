"""The audit log (`$PDCTL_AUDIT_LOG`, else audit.jsonl in pdctl's state directory), one concept a module:
`writer` appends a record per mutating action under a lock (`append`, `audited`); `records` reads the log and
answers `pdctl history` (`read_records`, `result_word`, `query` by action, result, inventory and time).
`from pdctl import audit` gives both sides' names."""

from __future__ import annotations

from pdctl.audit.records import (
    RESULT_WORDS,
    AuditLine,
    CorruptLine,
    InventoryFilter,
    Record,
    ResultWord,
    fold_runs,
    inventory_name_of,
    line_json,
    matches_action,
    parse_line,
    parse_when,
    query,
    read_records,
    record_time,
    result_word,
)
from pdctl.audit.writer import STARTED, Audited, append, audited, check_writable

__all__ = [
    "RESULT_WORDS",
    "STARTED",
    "AuditLine",
    "Audited",
    "CorruptLine",
    "InventoryFilter",
    "Record",
    "ResultWord",
    "append",
    "audited",
    "check_writable",
    "fold_runs",
    "inventory_name_of",
    "line_json",
    "matches_action",
    "parse_line",
    "parse_when",
    "query",
    "read_records",
    "record_time",
    "result_word",
]
