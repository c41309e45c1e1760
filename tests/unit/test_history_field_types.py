"""A record whose fields have the wrong JSON type (issue 28 re-pass): `"run": ["x"]` crashed `pdctl history` (text
and `--result`) with `unexpected TypeError: unhashable type: 'list'` where runs are folded. Such a record is damage:
read as a corrupt line naming the field, shown as such, never a crash; the same for every field the reader matches,
hashes, compares or shows (time, operator, inventory, action, result, run, exit_code, ...). Real log files, real
CLI."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from pdctl import audit
from pdctl.audit.records import CorruptLine, fold_runs, parse_line
from pdctl.checks.heal_ledger import heal_ledger
from pdctl.cli.app import app

GOOD = {
    "time": "2026-01-01T10:00:00+0000",
    "operator": "op@h",
    "inventory": "/srv/live.yaml",
    "deployment": "live",
    "action": "restart --pair",
    "args": {},
    "result": "ok",
    "duration_s": 1.0,
    "run": "r1",
}


@pytest.fixture
def log(tmp_path, monkeypatch):
    path = tmp_path / "audit.jsonl"
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("PDCTL_INVENTORY", raising=False)
    return path


def _write(path, *records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _history(*args: str):
    r = CliRunner().invoke(app, ["history", *args])
    assert "TypeError" not in r.output and "unexpected" not in r.output, r.output
    return r


def test_a_run_that_is_a_list_is_shown_as_a_corrupt_line_not_a_crash(log):
    """The reproduction: a started record whose run is ["x"], next to a good run (started, then ok)."""
    _write(log, {**GOOD, "result": "started", "run": ["x"]}, {**GOOD, "result": "started"}, GOOD)
    r = _history()
    assert r.exit_code == 0
    assert r.stdout.count("CORRUPT LINE") == 1 and "field 'run' is a JSON array, not a string" in r.stdout
    assert "restart --pair" in r.stdout and "unfinished" not in r.stdout  # the good run folded to its end
    r = _history("--result", "ok")
    assert r.exit_code == 0 and "restart --pair" in r.stdout
    r = _history("--result", "unfinished")
    assert r.exit_code == 0 and "no records match" in r.stdout  # the damaged start is no unfinished run
    doc = json.loads(_history("--json").stdout)
    assert doc["records"][0]["reason"] == "field 'run' is a JSON array, not a string"


@pytest.mark.parametrize(
    "field,value,kind",
    [
        ("run", {"a": 1}, "a JSON object, not a string"),
        ("run", 7, "a JSON number, not a string"),
        ("time", ["2026-01-01T10:00:00+0000"], "a JSON array, not a string"),
        ("time", 1767261600, "a JSON number, not a string"),
        ("action", ["restart --pair"], "a JSON array, not a string"),
        ("result", ["ok"], "a JSON array, not a string"),
        ("result", None, "JSON null, not a string"),
        ("exit_code", [0], "a JSON array, not an integer"),
        ("exit_code", True, "a JSON boolean, not an integer"),
        ("exit_code", "0", "a JSON string, not an integer"),
        ("operator", {"u": 1}, "a JSON object, not a string"),
        ("inventory", ["/srv/live.yaml"], "a JSON array, not a string"),
        ("deployment", ["live"], "a JSON array, not a string"),
        ("playbook_run", ["p"], "a JSON array, not a string"),
    ],
)
def test_every_field_the_reader_uses_with_a_wrong_type_is_a_corrupt_line(log, field, value, kind):
    """The variant: each field the reader hashes, compares or shows, with another JSON type, through every filter
    of the real CLI; and the heal ledger reads the same log without a crash."""
    _write(log, {**GOOD, "result": "started"}, {**GOOD, field: value}, GOOD)
    line = parse_line(json.dumps({**GOOD, field: value}).encode(), 2)
    assert isinstance(line, CorruptLine) and line.reason == f"field {field!r} is {kind}"
    for args in ([], ["--result", "ok"], ["--result", "failed"], ["--action", "restart"], ["--since", "3650d"],
                 ["-i", "live"], ["-n", "1"]):  # fmt: skip
        r = _history(*args)
        assert r.exit_code == 0, (args, r.output)
    r = _history()
    assert r.stdout.count("CORRUPT LINE") == 1 and f"field '{field}' is {kind}" in r.stdout
    lines = audit.read_records(log)
    assert heal_ledger(lines, deployment="live", inventory="/srv/live.yaml", now=time.time()).heals_at == ()


def test_optional_fields_may_be_null_and_fold_runs_ignores_a_run_that_is_no_string():
    """null in an optional field is no damage (a run-less record); fold_runs given records read some other way
    (a dict built in code) still never hashes a list."""
    line = parse_line(json.dumps({**GOOD, "run": None, "exit_code": None, "deployment": None}).encode(), 1)
    assert isinstance(line, dict)
    started = {**GOOD, "result": "started", "run": ["x"]}
    assert fold_runs([started, {**GOOD, "run": ["x"]}]) == [started, {**GOOD, "run": ["x"]}]
