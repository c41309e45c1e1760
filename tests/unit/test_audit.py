"""The audit log: one valid JSON line per record, secrets masked, concurrent writers never interleave."""

import json
import multiprocessing as mp
import os
import threading
import time

import pytest

from pdctl.audit import writer
from pdctl.audit.records import fold_runs, read_records, result_word
from pdctl.errors import Interrupted, LintRefused, StepFailed, UsageError


def _writer(path, n, tag):
    for k in range(n):
        writer.append(
            "test",
            inventory="inv",
            args={"k": k, "tag": tag, "pad": "x" * 5000},
            result="ok",
            started=time.time(),
            path=path,
        )


def test_concurrent_writers_leave_one_valid_line_each(tmp_path):
    path = tmp_path / "audit.jsonl"
    procs = [mp.Process(target=_writer, args=(path, 50, t)) for t in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    lines = path.read_text().splitlines()
    assert len(lines) == 200
    recs = [json.loads(line) for line in lines]
    assert sorted((r["args"]["tag"], r["args"]["k"]) for r in recs) == sorted(
        (t, k) for t in range(4) for k in range(50)
    )


def test_env_is_masked(tmp_path):
    path = tmp_path / "a.jsonl"
    writer.append(
        "deploy",
        inventory="i",
        result="ok",
        started=time.time(),
        path=path,
        extra={"roles": [{"env": {"HF_TOKEN": "hf_abc", "PLAIN": "1"}}]},
    )
    text = path.read_text()
    assert "hf_abc" not in text
    rec = read_records(path)[0]
    assert rec["roles"][0]["env"]["PLAIN"] == "1"


# -- a run leaves a trace before it acts; an unwritable log refuses it ---------------------------------------------


@pytest.fixture
def log(tmp_path, monkeypatch):
    path = tmp_path / "audit.jsonl"
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(path))
    return path


def test_a_marked_run_records_started_before_acting_and_its_end_with_the_same_run_id(log):
    with writer.audited("restart --pair", inventory="i", args={}, mark_start=True) as rec:
        (started,) = read_records(log)  # already there while the action runs
        assert started["result"] == "started" and started["run"] == rec.run
        rec.result = "ok"
    _, end = read_records(log)
    assert end["result"] == "ok" and end["run"] == started["run"]


def test_an_interrupt_names_its_signal_and_records_the_state_left(log):
    with pytest.raises(KeyboardInterrupt):
        with writer.audited(
            "deploy", inventory="i", args={}, mark_start=True, states=lambda: {"prefill[0]": "running (pid 1)"}
        ):
            raise Interrupted("SIGTERM")
    started, end = read_records(log)
    assert end["result"] == "interrupted by SIGTERM" and end["roles"] == {"prefill[0]": "running (pid 1)"}
    assert result_word(end) == ("interrupted", "by SIGTERM")


@pytest.mark.parametrize(
    "make, code, word",
    [
        (lambda: _step_failed_unreachable(), 3, "unreachable"),
        (lambda: StepFailed("decode did not become ready"), 1, "failed"),
        (lambda: LintRefused("decode: bad flag"), 2, "usage"),
        (lambda: ValueError("Port out of range"), 1, "failed"),
    ],
)
def test_an_error_is_recorded_with_its_exit_code_which_decides_the_result_word(log, make, code, word):
    """A StepFailed that got no answer from a host exits 3: its record says exit_code 3 and history reads it as
    unreachable, not failed (`pdctl down` stopped at an unreachable host); every error's word follows its code."""
    with pytest.raises(Exception):
        with writer.audited("down", inventory="i", args={}, mark_start=True):
            raise make()
    _, end = read_records(log)
    assert end["exit_code"] == code and result_word(end).word == word


def _step_failed_unreachable():
    e = StepFailed("stopped at step 'stop decode[0]@gpu1:41002': host 'gpu1' unreachable over SSH")
    e.exit_code = 3  # as ops.sequence makes it for a step that got no answer
    return e


def test_a_killed_run_is_a_started_record_alone_and_shows_unfinished(log):
    with writer.audited("deploy", inventory="i", args={}, mark_start=True) as done:
        done.result = "ok"
    writer.append("deploy", inventory="i", result="started", started=0, extra={"run": "killed"})  # kill -9 here
    lines = fold_runs(read_records(log))
    assert [(x["run"], x["result"]) for x in lines] == [(done.run, "ok"), ("killed", "started")]
    assert result_word(lines[1]).word == "unfinished"


def _refused_in_time(target, path):
    """audited() on `path`: the UsageError it raises (within 5 s: a FIFO must not hang us) and whether the body ran."""
    out = {}

    def go():
        try:
            with writer.audited("restart --role router", inventory="i", args={}, mark_start=target):
                out["ran"] = True
        except UsageError as e:
            out["error"] = e

    th = threading.Thread(target=go, daemon=True)
    th.start()
    th.join(5)
    assert not th.is_alive(), f"audited() hung on {path}"
    return out


@pytest.mark.parametrize("mark_start", [True, False])
@pytest.mark.parametrize("kind", ["directory", "fifo", "fifo with a reader", "file in place of its directory"])
def test_an_audit_log_that_cannot_be_written_refuses_before_the_action_naming_it(
    tmp_path, monkeypatch, kind, mark_start
):
    path = tmp_path / "audit.jsonl"
    reader = None
    if kind == "directory":
        path.mkdir()
    elif kind.startswith("fifo"):
        os.mkfifo(path)
        if kind == "fifo with a reader":
            reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    else:
        (tmp_path / "blocker").write_text("")
        path = tmp_path / "blocker" / "audit.jsonl"
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(path))
    try:
        out = _refused_in_time(mark_start, path)
    finally:
        if reader is not None:
            os.close(reader)
    assert "ran" not in out
    e = out["error"]
    assert e.exit_code == 2 and str(path) in e.message and "nothing was done" in e.message


def test_the_end_record_failing_does_not_hide_the_actions_own_error(log):
    with pytest.raises(RuntimeError, match="boom"):
        with writer.audited("deploy", inventory="i", args={}, mark_start=True):
            log.unlink()
            log.mkdir()  # the log became unwritable while the action ran
            raise RuntimeError("boom")


def test_the_writer_and_the_query_are_two_modules_and_audit_names_both():
    """Appending a record needs none of the reading side; `from pdctl import audit` still offers both."""
    import ast
    from pathlib import Path

    from pdctl import audit

    tree = ast.parse(Path(writer.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "pdctl.audit.records" not in imported
    assert audit.append is writer.append and audit.read_records is read_records
    assert audit.result_word is result_word and audit.STARTED == writer.STARTED == "started"
