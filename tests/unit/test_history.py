"""`pdctl history`: one line per record, results in a few words, filters by action and inventory, and a clear
"no records match" when nothing does."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.audit import result_word
from pdctl.render import shorten

HAZARD = (
    "HazardRefused: refused: restarting decode while prefill[0]@gpu-1:30000 runs on leaves the KV bootstrap of "
    "the pair degraded (the seed's decode-only restarts: transfers then fail silently while /health stays "
    "green). Second sentence.\nand a second line"
)


@pytest.fixture
def log(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("PDCTL_AUDIT_LOG", raising=False)
    monkeypatch.delenv("PDCTL_INVENTORY", raising=False)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "state" / "pdctl" / "audit.jsonl"
    path.parent.mkdir(parents=True)
    inv = tmp_path / "prod.yaml"
    inv.write_text(
        yaml.safe_dump(
            {
                "name": "prod",
                "roles": {
                    "prefill": [{"port": 31000, "bootstrap_port": 9000}],
                    "decode": [{"port": 31002}],
                    "router": [{"port": 31001}],
                },
            }
        )
    )

    def rec(action, result, inventory="<embedded default>", **extra):
        return {
            "time": "2025-01-01T00:00:00+0000",
            "operator": "oncall",
            "inventory": inventory,
            "action": action,
            "args": {},
            "result": result,
            "duration_s": 1.25,
            **extra,
        }

    recs = [
        rec("restart --role decode", HAZARD, inventory="prod.yaml"),
        rec("restart --pair", "ok"),
        rec("storm", "passed"),
        rec(
            "run final-health",
            "failed at step 2 'transfers-and-config': layers failed: flags",
            inventory=str(inv),
            inventory_name="prod",
            exit_code=1,
        ),
        rec("deploy", "UnreachableError: ssh gpu-1: connection refused"),
        rec("run co-restart", "interrupted at step 1 'co-restart' (Ctrl-C)", exit_code=130),
        rec("down", "LockHeld: held by alice since 10:00"),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return {"path": path, "inv": inv, "tmp": tmp_path}


def _rows(out: str) -> list[str]:
    """The table's record rows: each starts with its time (2025-...) or says it is a corrupt line."""
    return [line for line in out.splitlines() if line[:4].isdigit() or line.startswith("CORRUPT")]


def _history(*args):
    return CliRunner().invoke(app, ["history", *args])


def test_each_record_is_one_line_with_a_short_result(log):
    r = _history()
    assert r.exit_code == 0, r.output
    rows = _rows(r.stdout)
    assert len(rows) == 7  # one line per record, however long its result
    out = r.stdout
    assert "HazardRefused" not in out and "LockHeld" not in out and "UnreachableError" not in out
    assert "refused: restarting decode while" in out and "Second sentence" not in out and "…" in out
    assert "unreachable: ssh gpu-1: connection refused" in out
    assert "passed" not in out.replace("passed:", "")  # ok and passed both read ok
    hazard_row = next(x for x in rows if "restart --role decode" in x)
    cell = hazard_row[hazard_row.index("refused") :].rsplit("…", 1)[0] + "…"  # the result column, cut
    assert len(cell) <= 80 and "restarting decode" in cell
    # the full text stays in --json
    full = json.loads(_history("--json").stdout)["records"][0]["result"]
    assert full == HAZARD


@pytest.mark.parametrize(
    "record, want",
    [
        ({"result": "ok"}, ("ok", "")),
        ({"result": "passed"}, ("ok", "")),
        ({"result": HAZARD}, ("refused", HAZARD.split("refused: ", 1)[1])),
        ({"result": "LockHeld: held by alice"}, ("refused", "held by alice")),
        ({"result": "UnreachableError: ssh x: timed out"}, ("unreachable", "ssh x: timed out")),
        ({"result": "InventoryError: prod.yaml: invalid inventory"}, ("usage", "prod.yaml: invalid inventory")),
        ({"result": "StepFailed: decode did not become ready"}, ("failed", "decode did not become ready")),
        ({"result": "failed: inflight stayed 3"}, ("failed", "inflight stayed 3")),
        ({"result": "final-health failed"}, ("failed", "final-health failed")),
        ({"result": "interrupted"}, ("interrupted", "")),
        (
            {"result": "failed at step 1 'x': error: refused", "exit_code": 4},
            ("refused", "at step 1 'x': error: refused"),
        ),
        ({"result": "failed at step 1 'x': action not ok", "exit_code": 1}, ("failed", "at step 1 'x': action not ok")),
        # the recorded exit code decides over an error's class and over a "stopped:" text (down, restart --rolling)
        (
            {"result": "StepFailed: stopped at step 'stop d': unreachable", "exit_code": 3},
            ("unreachable", "stopped at step 'stop d': unreachable"),
        ),
        (
            {"result": "stopped: unit 0: host gpu1 did not answer", "exit_code": 3},
            ("unreachable", "stopped: unit 0: host gpu1 did not answer"),
        ),
        ({"result": "LintRefused: decode: bad flag", "exit_code": 2}, ("usage", "decode: bad flag")),
    ],
)
def test_result_words(record, want):
    assert result_word(record) == want


def test_shorten_keeps_the_first_sentence_within_the_limit():
    assert shorten("one. two") == "one.…"
    assert shorten("short") == "short"
    assert shorten("line one\nline two") == "line one…"
    long = "x" * 200
    assert len(shorten(long)) == 80 and shorten(long).endswith("…")
    assert shorten("bind 0.0.0.0:30000 failed") == "bind 0.0.0.0:30000 failed"
    # escaped before measured: twenty ESCs take 80 cells, not the 20 characters they were
    wild = shorten("\x1b[2J" * 20)
    assert "\x1b" not in wild and wild.startswith("\\x1b[2J") and len(wild) == 80 and wild.endswith("…")


def test_no_match_prints_only_that_and_the_filters(log):
    with open(log["path"], "a") as f:
        f.write("{not json\n")
    r = _history("--action", "bogus")
    assert r.exit_code == 0
    assert r.stdout.strip() == "no records match --action 'bogus'"
    assert json.loads(_history("--action", "bogus", "--json").stdout)["records"] == []


def test_empty_log_says_so(log):
    log["path"].write_text("")
    r = _history()
    assert r.exit_code == 0 and r.stdout.startswith("no records yet") and "audit log" not in r.stdout


def test_inventory_filter_by_file_and_by_name(log):
    unnamed = log["tmp"] / "unnamed.yaml"  # named "local" by default, like the embedded default: no match
    unnamed.write_text(log["inv"].read_text().replace("name: prod\n", ""))
    assert json.loads(_history("--json", "-i", str(unnamed)).stdout)["records"] == []
    for args in (["-i", str(log["inv"])], ["-i", "prod.yaml"], ["--inventory", "prod"]):
        recs = json.loads(_history("--json", *args).stdout)["records"]
        assert [x["action"] for x in recs] == ["restart --role decode", "run final-health"], args
    recs = json.loads(_history("--json", "-i", "prod", "--action", "run").stdout)["records"]
    assert [x["action"] for x in recs] == ["run final-health"]
    r = _history("-i", "staging")
    assert r.stdout.strip() == "no records match -i staging"
    bad = log["tmp"] / "bad.yaml"
    bad.write_text("roles: 3\n")
    assert _history("-i", str(bad)).exit_code == 2  # an inventory file that does not load: usage error


def test_a_record_made_with_a_relative_path_is_found_from_any_directory(log, monkeypatch):
    """`pdctl deploy -i prod.yaml` in one directory, `history -i prod` in another: the record holds the absolute
    path, so the filter reads the right file (with the path as typed it read ./prod.yaml of the other directory)."""
    from pdctl import audit

    log["path"].write_text("")
    audit.append("deploy", inventory="prod.yaml", result="ok", started=0.0)  # typed in tmp (the fixture's cwd)
    other = log["tmp"] / "other"
    other.mkdir()
    (other / "prod.yaml").write_text(log["inv"].read_text().replace("name: prod", "name: staging"))
    monkeypatch.chdir(other)
    recs = json.loads(_history("--json", "-i", "prod").stdout)["records"]
    assert [(r["action"], r["inventory"]) for r in recs] == [("deploy", str(log["inv"]))]
    assert json.loads(_history("--json", "-i", "staging").stdout)["records"] == []


def test_run_records_carry_the_inventory_name(log, monkeypatch):
    log["path"].write_text("")
    pb = log["tmp"] / "pb.yaml"
    pb.write_text(
        yaml.safe_dump(
            {"name": "t", "steps": [{"name": "s", "action": "shell", "args": {"role": "decode", "command": "true"}}]}
        )
    )
    assert CliRunner().invoke(app, ["run", str(pb)]).exit_code == 0
    rec = json.loads(log["path"].read_text().splitlines()[0])
    assert rec["inventory_name"] == "local"
    recs = json.loads(_history("--json", "-i", "local").stdout)["records"]  # --json: raw lines, started first
    assert [(x["action"], x["result"]) for x in recs] == [("run t", "started"), ("run t", "ok")]


@pytest.mark.parametrize(
    "record, want",
    [
        ({"result": "started", "run": "a1"}, ("unfinished", "started, no end recorded: killed, or still running")),
        ({"result": "interrupted by SIGTERM"}, ("interrupted", "by SIGTERM")),
        ({"result": "taken over: abandoned deployment lock x"}, ("taken over", "abandoned deployment lock x")),
    ],
)
def test_result_words_of_runs_and_takeovers(record, want):
    assert result_word(record) == want


def test_a_finished_run_is_one_row_and_a_killed_one_shows_unfinished(log):
    def rec(action, result, run):
        return {
            "time": "2025-01-02T00:00:00+0000",
            "operator": "oncall",
            "inventory": "<embedded default>",
            "action": action,
            "args": {},
            "result": result,
            "duration_s": 0.0,
            "run": run,
        }

    extra = [
        rec("deploy", "started", "r-done"),
        rec("deploy", "ok", "r-done"),
        rec("restart --pair", "started", "r-killed"),
    ]
    log["path"].write_text(log["path"].read_text() + "".join(json.dumps(r) + "\n" for r in extra))
    r = _history()
    assert r.exit_code == 0, r.output
    rows = _rows(r.stdout)
    assert len(rows) == 7 + 2  # the finished run once, by its end; the killed one by its start
    assert [x for x in rows if "unfinished" in x] == [rows[-1]] and "restart --pair" in rows[-1]
    assert "no end recorded" in rows[-1]
    # --json keeps every line of the log as written
    assert [x["result"] for x in json.loads(_history("--json").stdout)["records"][-3:]] == ["started", "ok", "started"]


def test_lines_counts_the_rows_shown_not_the_started_records(log):
    runs = [
        {
            "time": "2025-01-03T00:00:00+0000",
            "operator": "oncall",
            "inventory": "<embedded default>",
            "action": f"restart --pair #{k}",
            "args": {},
            "result": res,
            "duration_s": 0.0,
            "run": f"r{k}",
        }
        for k in range(3)
        for res in ("started", "ok")
    ]
    log["path"].write_text("".join(json.dumps(r) + "\n" for r in runs))
    r = _history("-n", "2")
    rows = _rows(r.stdout)
    assert len(rows) == 2 and "#1" in rows[0] and "#2" in rows[1], r.stdout


def test_a_path_folds_at_the_width_never_at_its_spaces():
    """Wrapped at spaces, `/srv/my deploy dir/with  two  spaces` lost its double space in the padding."""
    from pdctl.render.history import fold_hard

    path = "/srv/my deploy dir/with  two  spaces/sub dir/inv.yaml"
    lines = fold_hard(path, 20).split("\n")
    assert "".join(lines) == path and all(len(x) == 20 for x in lines[:-1]) and len(lines[-1]) <= 20
    assert fold_hard("short", 20) == "short" and fold_hard("漢字漢字", 4) == "漢字\n漢字"  # in terminal cells


def test_a_record_without_a_result_is_unrecorded_not_failed():
    from pdctl.audit import result_word

    assert result_word({"time": 5, "inventory": 7}) == ("unrecorded", "the record holds no result")
    assert result_word({"result": "", "exit_code": 1}).word == "failed"  # the exit code still says it
