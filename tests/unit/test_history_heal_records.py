"""`pdctl history` reads the watch's heal records right (issue 28, W4): a heal that healed is ok, never "failed"
(`--result failed` listed every successful `watch heal`: its record had no outcome). A heal appends a "started"
record with its evidence and an end with its outcome and exit code (pdctl.checks.heal_ledger.HealEnd); records from
before that, written before the heal acted, hold no outcome and read "unrecorded", never "failed"."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from pdctl import audit
from pdctl.checks.heal_ledger import HEAL_ACTION, HealEnd, heal_end, heal_error_end
from pdctl.cli.app import app
from pdctl.errors import LockHeld
from tests.unit.heal_records import audit_env, heal_ended, heal_started

OLD_HEAL = "evidence recorded; running `pdctl restart --pair`"  # what a heal record said before it had an end


@pytest.fixture
def log(tmp_path, monkeypatch):
    return audit_env(tmp_path, monkeypatch)


def _heal(run: str, end: HealEnd) -> None:
    """One heal's records as the heal appends them (pdctl.ops.heal): its start with evidence, its restart's own
    records, its end."""
    inv = "<embedded default>"
    heal_started(inv, run, evidence={"case": "pair-broken"})
    audit.append("restart --pair", inventory=inv, result=audit.STARTED, started=time.time(), extra={"run": "r" + run})
    audit.append("restart --pair", inventory=inv, result="ok" if end.outcome == "done" else end.result,
                 started=time.time(), extra={"run": "r" + run, "exit_code": end.exit_code})  # fmt: skip
    heal_ended(inv, run, end)


def _history(*args: str):
    r = CliRunner().invoke(app, ["history", *args])
    assert r.exit_code == 0, r.output
    return r


def _heal_records(*args: str) -> list[dict]:
    return [x for x in json.loads(_history("--json", *args).stdout)["records"] if x.get("action") == HEAL_ACTION]


def test_a_heal_that_healed_is_ok_and_failed_lists_only_the_red_one(log):
    """The reproduction: a successful heal is listed by --result ok, not by --result failed; a heal whose
    final-health ran red is the failed one."""
    _heal("good", heal_end(ok=True))
    _heal("red", heal_end(ok=False))
    failed = _heal_records("--result", "failed")
    assert [(x["run"], x["outcome"], x["final_health"]) for x in failed] == [("red", "failed", "red")]
    ok = _heal_records("--result", "ok")
    assert [(x["run"], x["outcome"], x["exit_code"]) for x in ok] == [("good", "done", 0)]
    # the table: a heal once, by its end (its start, with the evidence, is in --json)
    rows = [line for line in _history("--action", "watch heal").stdout.splitlines() if "watch heal" in line]
    assert len(rows) == 2 and "ok" in rows[0].split() and "failed" not in rows[0]
    assert "failed: final-health failed" in rows[1]
    assert len(_heal_records()) == 4  # --json: every line, starts included, each with its evidence
    assert all("evidence" in x for x in _heal_records() if x["result"] == audit.STARTED)


def test_a_heal_refused_by_the_lock_reads_refused_and_an_old_heal_record_reads_unrecorded(log):
    """The variant: a heal whose restart found the lock held is "refused" (exit 4 in its record); a heal record
    written by an older pdctl (before acting, with no outcome and no exit code) is "unrecorded", saying where its
    outcome is, and is listed by none of ok, failed or refused."""
    _heal("lock", heal_error_end(LockHeld("deployment lock /s/locks/local.lock on local is held by alice")))
    with log.open("a") as f:
        f.write(
            json.dumps(
                {
                    "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "operator": "oncall",
                    "inventory": "<embedded default>",
                    "action": HEAL_ACTION,
                    "args": {"case": "pinned", "action": "restart --pair"},
                    "result": OLD_HEAL,
                    "duration_s": 0.2,
                }
            )
            + "\n"
        )
    assert [x["run"] for x in _heal_records("--result", "refused")] == ["lock"]
    assert _heal_records("--result", "failed") == [] and _heal_records("--result", "ok") == []
    old = _heal_records("--result", "unrecorded")
    assert [x["result"] for x in old] == [OLD_HEAL]
    word, detail = audit.result_word(old[0])
    assert word == "unrecorded" and "its outcome is in that `restart --pair` record" in detail
    out = _history("--action", "watch heal").stdout
    assert "refused: deployment lock" in out and "unrecorded: evidence recorded" in out and "failed" not in out


@pytest.mark.parametrize(
    "record, word",
    [
        ({"result": "installed, running as pid 7 (systemd)", "exit_code": 0}, "ok"),  # a recorded 0 is ok
        ({"result": "final-health failed", "exit_code": 1}, "failed"),
        ({"result": OLD_HEAL, "exit_code": 1}, "failed"),  # an exit code recorded decides over the old text
        ({"result": "evidence recorded; running something else"}, "failed"),  # only the heal's own old words
    ],
)
def test_an_exit_code_recorded_decides_the_word(record, word):
    assert audit.result_word(record).word == word
