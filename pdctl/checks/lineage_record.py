"""The co-restart record: what pdctl stores after a clean co-restart (deploy, restart --pair, rolling) and the
lineage judge (checks/lineage.py) reads back: each live main process's role, pid and start time then.

Stored as JSON, label -> {"role", "pid", "start"} (`LineageRecord.dump`); `LineageRecord.parse` is the one reader:
a record that is not that shape is no record (the judge then falls back to start times), never an error. Its reading
and writing on the hosts are ops/lineage_record.py's. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import msgspec


class RecordedProcess(msgspec.Struct, frozen=True):
    """One process as it was at the co-restart. Keys the record does not know are ignored (a newer pdctl may add
    some); `start` is None when its start time could not be read, `pid` None in a record an older pdctl wrote for
    an active service without a main pid (read as changed, never as the whole record unreadable)."""

    role: str
    pid: int | None
    start: float | None = None


_STORED = msgspec.json.Decoder(dict[str, RecordedProcess])


@dataclass(frozen=True)
class LineageRecord:
    """label -> RecordedProcess of the last co-restart."""

    processes: Mapping[str, RecordedProcess]

    @classmethod
    def of(cls, starts: Mapping[str, tuple[str, int, float | None]]) -> LineageRecord:
        """The record of `starts` (label -> (role, pid, start)), to store after a clean co-restart."""
        return cls({label: RecordedProcess(role, pid, start) for label, (role, pid, start) in starts.items()})

    @classmethod
    def parse(cls, stored: bytes | str | None) -> LineageRecord | None:
        """The record stored as `stored`; None when there is none, or it is empty or not a record (malformed JSON,
        a wrong shape)."""
        try:
            return cls(_STORED.decode(stored)) if stored else None
        except msgspec.DecodeError:  # ValidationError is one too
            return None

    def dump(self) -> str:
        """The stored form: JSON label -> {"role", "pid", "start"}, one space of indent (as pdctl always wrote it)."""
        return json.dumps({label: msgspec.to_builtins(p) for label, p in self.processes.items()}, indent=1)

    def get(self, label: str) -> RecordedProcess | None:
        return self.processes.get(label)
