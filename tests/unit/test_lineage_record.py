"""The co-restart record's one parse and one dump (checks/lineage_record.py): the stored format is the one pdctl
has always written, so a record left by an older pdctl is read, and a file that is not a record is no record."""

from __future__ import annotations

import json

import pytest

from pdctl.checks.lineage import judge_lineage
from pdctl.checks.lineage_record import LineageRecord, RecordedProcess
from pdctl.checks.result import Status

NOW = 1_800_000_000.0
P, D, R = "prefill[0]@local:30000", "decode[0]@local:30002", "router[0]@local:30001"
STARTS = {P: ("prefill", 100, NOW - 600.0), D: ("decode", 200, NOW - 500.5), R: ("router", 300, None)}

# a record exactly as the code before the typed record wrote it: json.dumps(label -> {...}, indent=1)
STORED_BEFORE = """{
 "prefill[0]@local:30000": {
  "role": "prefill",
  "pid": 100,
  "start": 1799999400.0
 },
 "decode[0]@local:30002": {
  "role": "decode",
  "pid": 200,
  "start": 1799999499.5
 },
 "router[0]@local:30001": {
  "role": "router",
  "pid": 300,
  "start": null
 }
}"""


def test_a_record_in_the_stored_format_is_read():
    rec = LineageRecord.parse(STORED_BEFORE.encode())
    assert rec is not None
    assert rec.get(D) == RecordedProcess("decode", 200, NOW - 500.5)
    assert rec.get(R) == RecordedProcess("router", 300, None)
    assert rec.get("decode[1]@local:30003") is None
    # and judged as the same processes: unchanged since the co-restart
    res = {r.target: r for r in judge_lineage(STARTS, rec, 900, now=NOW)}
    assert res[D].status is Status.PASS and res[D].observed.startswith("unchanged since the last co-restart")


def test_dump_is_the_stored_format_byte_for_byte():
    assert LineageRecord.of(STARTS).dump() == STORED_BEFORE
    assert LineageRecord.parse(LineageRecord.of(STARTS).dump()) == LineageRecord.of(STARTS)


def test_an_integer_start_and_an_unknown_key_are_read():
    rec = LineageRecord.parse(json.dumps({D: {"role": "decode", "pid": 2, "start": 7, "host": "h"}}))
    assert rec is not None and rec.get(D) == RecordedProcess("decode", 2, 7.0)


def test_a_null_pid_an_older_pdctl_wrote_spoils_only_its_own_entry():
    """An older pdctl recorded an active service without a main pid as `"pid": null`: the rest of the record is
    still read (the pairs keep their record evidence) and that entry counts as changed."""
    stored = json.loads(STORED_BEFORE)
    stored[R]["pid"] = None
    rec = LineageRecord.parse(json.dumps(stored))
    assert rec is not None and rec.get(R) == RecordedProcess("router", None, None)
    res = {r.target: r for r in judge_lineage(STARTS, rec, 900, now=NOW)}
    assert res[D].status is Status.PASS and res[D].observed.startswith("unchanged since the last co-restart")


@pytest.mark.parametrize(
    "stored",
    [
        None,
        b"",
        b"{not json",
        b"[]",
        b'{"decode[0]": [1, 2, 3]}',
        b'{"decode[0]": {"role": "decode"}}',  # no pid
        b'{"decode[0]": {"role": "decode", "pid": "200", "start": 1.0}}',
        b'{"time": 1.0, "roles": {}}',
    ],
)
def test_a_file_that_is_not_a_record_is_no_record(stored):
    assert LineageRecord.parse(stored) is None
