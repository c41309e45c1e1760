"""The audit query API on typed inputs: reading lines (records and corrupt lines of every shape), each filter,
the last N, and the inventory filter by name and by a real inventory file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pdctl.audit import records
from pdctl.audit.records import CorruptLine, InventoryFilter
from pdctl.errors import InventoryError, UsageError

INVENTORY = {
    "roles": {
        "prefill": [{"port": 31000, "bootstrap_port": 9000}],
        "decode": [{"port": 31002}],
        "router": [{"port": 31001}],
    }
}


def rec(action="deploy", inventory="<embedded default>", **extra):
    return {
        "time": "2025-01-01T00:00:00+0000",
        "operator": "oncall",
        "inventory": inventory,
        "action": action,
        "args": {},
        "result": "ok",
        "duration_s": 1.0,
        **extra,
    }


def no_files(path):
    raise AssertionError(f"read {path}: the query should not need it")


# -- reading ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, reason",
    [
        (b"[1, 2]", "a JSON array, not an object"),
        (b"42", "a JSON number, not an object"),
        (b"4.5", "a JSON number, not an object"),
        (b"null", "JSON null, not an object"),
        (b'"text"', "a JSON string, not an object"),
        (b"true", "a JSON boolean, not an object"),
        (b"{not json", "not valid JSON: Expecting property name enclosed in double quotes (column 2)"),
        (b'{"action": "deploy", "result": "ok"', "not valid JSON: Expecting ',' delimiter (column 36)"),
        (b'{"action": "d\xe9ploy"}', "not UTF-8 (byte 14)"),
        (b"\xff\xfe", "not UTF-8 (byte 1)"),
        (b"[" * 100_000 + b"]" * 100_000, "not valid JSON: RecursionError"),
    ],
)
def test_a_line_that_is_no_object_is_a_corrupt_line_with_its_reason(raw, reason):
    line = records.parse_line(raw + b"\n", 7)
    assert isinstance(line, CorruptLine)
    assert (line.lineno, line.reason) == (7, reason)
    assert line.text == raw.decode(errors="replace")


def test_blank_lines_are_skipped_and_records_are_dicts():
    assert records.parse_line(b"  \n", 1) is None
    assert records.parse_line(b'{"action": "deploy"}\n', 1) == {"action": "deploy"}


def test_read_records_keeps_corrupt_lines_in_place_with_their_line_numbers(tmp_path):
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b'{"action": "a"}\n\n[1,2]\n{"action": "b"}\n\xc3\x28\nnull\n')
    lines = records.read_records(path)
    assert lines[0] == {"action": "a"} and lines[2] == {"action": "b"}
    assert [(x.lineno, x.reason) for x in lines if isinstance(x, CorruptLine)] == [
        (3, "a JSON array, not an object"),
        (5, "not UTF-8 (byte 1)"),
        (6, "JSON null, not an object"),
    ]
    assert records.read_records(tmp_path / "missing.jsonl") == []


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_history_over_an_audit_log_that_is_no_regular_file_is_exit_2_without_blocking(tmp_path, monkeypatch, kind):
    import os
    import threading

    if kind == "fifo":
        log = tmp_path / "audit-pipe"
        os.mkfifo(log)  # nobody writes to it: opening it for reading would block forever
    else:
        log = Path("/dev/zero") if kind == "device" else tmp_path

    def bounded(fn):  # in a thread: a read that blocks fails the test instead of hanging the suite
        box: dict = {}

        def run():
            try:
                box["value"] = fn()
            except Exception as e:  # noqa: BLE001 -- handed to the test
                box["value"] = e

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(10)
        assert not t.is_alive(), "reading the audit log blocked"
        return box["value"]

    e = bounded(lambda: records.read_records(Path(log)))
    assert isinstance(e, UsageError), e
    assert e.exit_code == 2 and e.message.startswith(f"{log}: is a")
    assert "not a regular file" in e.message and "PDCTL_AUDIT_LOG" in e.hint
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(log))
    from pdctl.cli.app import app

    r = bounded(lambda: CliRunner().invoke(app, ["history"]))
    assert r.exit_code == 2, r.output
    assert str(log) in r.output and "unexpected" not in r.output and "Traceback" not in r.output


def test_a_large_audit_log_is_streamed_without_a_size_cap(tmp_path):
    path = tmp_path / "audit.jsonl"
    line = json.dumps(rec("deploy", pad="x" * 1000)).encode() + b"\n"
    path.write_bytes(line * 3000)  # 3 MB: over the 1 MiB cap of inventory files
    lines = records.read_records(path)
    assert len(lines) == 3000 and lines[-1]["action"] == "deploy"


def test_line_json_keeps_the_corrupt_key():
    want = {"corrupt": "[1,2]", "reason": "a JSON array, not an object"}  # the text as it is, and why
    assert records.line_json(CorruptLine(3, "[1,2]", "a JSON array, not an object")) == want
    r = rec()
    assert records.line_json(r) == r  # a copy: a URL in it would be masked


def test_history_shows_corrupt_lines_of_every_shape_and_never_crashes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("PDCTL_AUDIT_LOG", raising=False)
    monkeypatch.delenv("PDCTL_INVENTORY", raising=False)
    path = tmp_path / "state" / "pdctl" / "audit.jsonl"
    path.parent.mkdir(parents=True)
    bad = [b"[1,2]", b"42", b"null", b"{not json", b"\xff\xfe"]
    path.write_bytes(json.dumps(rec("deploy")).encode() + b"\n" + b"\n".join(bad) + b"\n")
    from pdctl.cli.app import app

    r = CliRunner().invoke(app, ["history"])
    assert r.exit_code == 0, r.output
    assert r.stdout.count("CORRUPT LINE") == 5 and "deploy" in r.stdout
    doc = json.loads(CliRunner().invoke(app, ["history", "--json"]).stdout)
    assert [(x["corrupt"], x["reason"].split(" (")[0]) for x in doc["records"][1:]] == [
        ("[1,2]", "a JSON array, not an object"),
        ("42", "a JSON number, not an object"),
        ("null", "JSON null, not an object"),
        ("{not json", "not valid JSON: Expecting property name enclosed in double quotes"),
        ("\ufffd\ufffd", "not UTF-8"),
    ]
    r = CliRunner().invoke(app, ["history", "--action", "deploy", "-i", "local"])
    assert r.exit_code == 0 and r.stdout.count("CORRUPT LINE") == 5


# -- action and limit ------------------------------------------------------------------------------------------------

LINES = [
    rec("run final-health"),
    rec("run co-restart"),
    rec("runaway"),
    CorruptLine(4, "x", "r"),
    rec("restart --pair"),
    rec(None),
    {"result": "no action"},
]


def test_action_matches_exactly_or_by_its_first_words():
    got = records.query(LINES, action="run", name_of=no_files)
    assert [x.get("action") if isinstance(x, dict) else "corrupt" for x in got] == [
        "run final-health",
        "run co-restart",
        "corrupt",
    ]
    got = records.query(LINES, action="run final-health", name_of=no_files)
    assert [x.get("action") if isinstance(x, dict) else "corrupt" for x in got] == ["run final-health", "corrupt"]
    assert records.matches_action(rec("restart --pair"), "restart")
    assert not records.matches_action(rec("runaway"), "run")
    assert not records.matches_action({"result": "ok"}, "run")


def test_only_corrupt_lines_left_means_nothing_matched():
    assert records.query(LINES, action="bogus") == []
    assert records.query([CorruptLine(1, "x", "r")]) == [CorruptLine(1, "x", "r")]  # no filter: shown as they are
    assert records.query([]) == []


def test_limit_keeps_the_last_n():
    assert records.query(LINES, limit=2) == LINES[-2:]
    assert records.query(LINES, limit=100) == LINES
    assert records.query(LINES, action="run", limit=1) == [LINES[3]]
    with pytest.raises(UsageError):
        records.query(LINES, limit=0)


# -- inventory -------------------------------------------------------------------------------------------------------


def test_inventory_by_name_from_the_record_or_through_name_of():
    lines = [
        rec(inventory="/srv/a.yaml", inventory_name="prod"),
        rec(inventory="/srv/b.yaml"),
        rec(inventory="/srv/c.yaml"),
        rec(inventory="prod"),
        rec(),
    ]
    calls = []

    def name_of(path):
        calls.append(path)
        return {"/srv/b.yaml": "prod", "<embedded default>": "local"}.get(path)

    lines = lines + [rec(inventory="/srv/b.yaml")]
    got = records.query(lines, inventory=InventoryFilter(name="prod"), name_of=name_of)
    assert [x["inventory"] for x in got] == ["/srv/a.yaml", "/srv/b.yaml", "prod", "/srv/b.yaml"]
    assert sorted(calls) == ["/srv/b.yaml", "/srv/c.yaml", "<embedded default>"]  # each file once per query
    got = records.query(lines, inventory=InventoryFilter(name="local"), name_of=name_of)
    assert [x["inventory"] for x in got] == ["<embedded default>"]


def test_inventory_name_of_goes_through_the_inventory_loader(tmp_path):
    good = tmp_path / "prod.yaml"
    good.write_text(yaml.safe_dump({"name": "prod", **INVENTORY}))
    unnamed = tmp_path / "unnamed.yaml"
    unnamed.write_text(yaml.safe_dump(INVENTORY))
    invalid = tmp_path / "invalid.yaml"  # has a name, but is no inventory: no name to match
    invalid.write_text("name: prod\nroles: 3\n")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    assert records.inventory_name_of(str(good)) == "prod"
    assert records.inventory_name_of(str(unnamed)) == "local"
    assert records.inventory_name_of(str(invalid)) is None
    assert records.inventory_name_of(str(binary)) is None
    assert records.inventory_name_of(str(tmp_path / "gone.yaml")) is None
    assert records.inventory_name_of(str(tmp_path)) is None
    assert records.inventory_name_of("<embedded default>") == "local"
    assert records.inventory_name_of("<other>") is None and records.inventory_name_of("") is None


def test_inventory_by_a_real_file_and_by_its_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    inv = tmp_path / "prod.yaml"
    inv.write_text(yaml.safe_dump({"name": "prod", **INVENTORY}))
    other = tmp_path / "staging.yaml"
    other.write_text(yaml.safe_dump({"name": "staging", **INVENTORY}))
    lines = [
        rec(inventory=str(inv)),
        rec(inventory="prod.yaml"),
        rec(inventory="elsewhere/prod.yaml"),
        rec(inventory=str(other)),
        rec(),
        CorruptLine(6, "42", "a JSON number, not an object"),
    ]
    for given in (str(inv), "prod.yaml", "./prod.yaml"):
        got = records.query(lines, inventory=given)
        assert got == lines[:2] + [lines[5]], given  # the file by its path (as recorded or resolved)
    # by name: the name in the file each record names (elsewhere/prod.yaml cannot be read from here)
    assert records.query(lines, inventory="prod") == lines[:2] + [lines[5]]
    assert records.query(lines, inventory="staging") == [lines[3], lines[5]]
    assert records.query(lines, inventory="local") == [lines[4], lines[5]]
    assert records.query(lines, inventory="nobody") == []


def test_inventory_resolve_a_file_a_removed_file_or_a_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prod.yaml").write_text(yaml.safe_dump(INVENTORY))
    assert InventoryFilter.resolve("prod.yaml") == InventoryFilter(source="prod.yaml")
    assert InventoryFilter.resolve("gone.yml") == InventoryFilter(source="gone.yml")
    assert InventoryFilter.resolve("old/inventory") == InventoryFilter(source="old/inventory")
    assert InventoryFilter.resolve("prod") == InventoryFilter(name="prod")
    gone = [rec(inventory=str(tmp_path / "gone.yml")), rec()]
    assert records.query(gone, inventory="gone.yml") == gone[:1]


@pytest.mark.parametrize(
    "content, words",
    [
        (b"roles: 3\n", "invalid inventory"),
        (b"name: [unclosed\n", "not valid YAML"),
        (b"", "the inventory is empty"),
        (b"\xff\xfe\x00", "not UTF-8"),
    ],
)
def test_an_inventory_file_that_does_not_load_is_a_usage_error_naming_it(tmp_path, content, words):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(content)
    with pytest.raises(InventoryError) as e:
        records.query([rec()], inventory=str(bad))
    assert e.value.message.startswith(f"{bad}: ") and words in e.value.message, e.value.message


def test_a_binary_inventory_file_exits_2_from_the_cli(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("PDCTL_AUDIT_LOG", raising=False)
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"\xff\xfe\x00")
    from pdctl.cli.app import app

    r = CliRunner().invoke(app, ["history", "-i", str(bad)])
    assert r.exit_code == 2 and "not UTF-8" in r.output and "unexpected" not in r.output


# -- result and time -------------------------------------------------------------------------------------------------


def at(time_text, result="ok", action="deploy"):
    return {**rec(action), "time": time_text, "result": result}


TIMED = [
    at("2025-01-01T09:00:00+0000"),
    at("2025-01-01T10:00:00+0000", "HazardRefused: refused: decode alone"),
    CorruptLine(3, "x", "r"),
    at("2025-01-01T12:00:00+0200", "final-health failed"),
    {**rec(), "time": "yesterday", "result": "started"},
]


def _times(lines):
    return [x["time"] if isinstance(x, dict) else "corrupt" for x in lines]


def test_result_matches_the_result_in_a_word():
    assert _times(records.query(TIMED, result="refused")) == ["2025-01-01T10:00:00+0000", "corrupt"]
    assert _times(records.query(TIMED, result="Failed")) == ["corrupt", "2025-01-01T12:00:00+0200"]
    assert _times(records.query(TIMED, result="unfinished")) == ["corrupt", "yesterday"]
    assert records.query(TIMED, result="interrupted") == []  # only corrupt lines left: nothing matched
    with pytest.raises(UsageError) as e:
        records.query(TIMED, result="bogus")
    assert "--result 'bogus'" in e.value.message and "unreachable" in e.value.hint


def test_since_and_until_keep_the_range_both_ends_included_across_offsets():
    since = records.parse_when("2025-01-01T10:00:00+00:00")
    got = records.query(TIMED, since=since)  # 12:00+02:00 is 10:00 UTC: in; an undated record cannot be ruled out
    assert _times(got) == ["2025-01-01T10:00:00+0000", "corrupt", "2025-01-01T12:00:00+0200", "yesterday"]
    until = records.parse_when("2025-01-01T09:30:00+00:00")
    assert _times(records.query(TIMED, until=until, result="ok")) == ["2025-01-01T09:00:00+0000", "corrupt"]
    assert records.query(TIMED, since=since, until=until, action="deploy", result="ok") == []


def test_when_is_an_iso_time_or_a_time_ago():
    from datetime import datetime, timezone

    now = datetime(2025, 1, 2, 12, 0, tzinfo=timezone.utc).timestamp()
    assert records.parse_when("30m", now=now) == datetime(2025, 1, 2, 11, 30, tzinfo=timezone.utc)
    assert records.parse_when("2h", now=now) == datetime(2025, 1, 2, 10, 0, tzinfo=timezone.utc)
    assert records.parse_when("1d", now=now) == datetime(2025, 1, 1, 12, 0, tzinfo=timezone.utc)
    assert records.parse_when("2025-01-01T10:00+02:00") == datetime(2025, 1, 1, 8, 0, tzinfo=timezone.utc)
    assert records.parse_when("2025-01-01").tzinfo is not None  # local time, made comparable
    for bad in ("soon", "30x", "-1h", "2025-13-01"):
        with pytest.raises(UsageError) as e:
            records.parse_when(bad, option="--until")
        assert e.value.message.startswith(f"--until {bad!r}")


def test_history_filters_by_result_and_since_from_the_cli(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("PDCTL_AUDIT_LOG", raising=False)
    path = tmp_path / "state" / "pdctl" / "audit.jsonl"
    path.parent.mkdir(parents=True)
    recent = records.parse_when("10m").strftime("%Y-%m-%dT%H:%M:%S%z")
    lines = [at("2025-01-01T09:00:00+0000"), at(recent, "failed: x", "restart --pair"), at(recent)]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    from pdctl.cli.app import app

    doc = json.loads(CliRunner().invoke(app, ["history", "--json", "--since", "1h"]).stdout)
    assert [x["time"] for x in doc["records"]] == [recent, recent]
    doc = json.loads(CliRunner().invoke(app, ["history", "--json", "--result", "failed", "--since", "1h"]).stdout)
    assert [x["action"] for x in doc["records"]] == ["restart --pair"]
    r = CliRunner().invoke(app, ["history", "--result", "refused"])
    assert r.exit_code == 0 and "no records match --result 'refused'" in r.stdout
    r = CliRunner().invoke(app, ["history", "--since", "last tuesday"])
    assert r.exit_code == 2 and "--since 'last tuesday'" in r.output
