"""`pdctl run` records that it started before its first mutating step, shares the run id with its final record,
and refuses before any step when the audit log cannot be written (issue 9, item 5 and "every mutating action
records that it started before it acts")."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from typer.testing import CliRunner

from pdctl.cli.app import app


@pytest.fixture
def env(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("PDCTL_OPERATOR", "unit-operator")
    monkeypatch.delenv("PDCTL_AUDIT_LOG", raising=False)
    return {"tmp": tmp_path, "audit": state / "pdctl" / "audit.jsonl"}


def _pb(tmp_path, steps, name="t"):
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump({"name": name, "steps": steps}, sort_keys=False))
    return p


def _touch(t, name="touch", **kw):
    return {"name": name, "action": "shell", "args": {"role": "decode", "command": f"touch {t}/{name}-ran"}, **kw}


def _records(env):
    return [json.loads(line) for line in env["audit"].read_text().splitlines()]


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_an_unwritable_audit_log_refuses_the_run_before_its_first_step(env, monkeypatch, kind):
    t = env["tmp"]
    log = t / "audit-here"
    os.mkfifo(log) if kind == "fifo" else log.mkdir()
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(log))
    r = CliRunner().invoke(app, ["run", str(_pb(t, [_touch(t)], name="pbtouch"))])
    assert r.exit_code == 2, r.output
    assert f"audit log {log}: is a" in r.output and "not a regular file" in r.output
    assert "refusing to run pbtouch (nothing was done)" in r.output
    assert not (t / "touch-ran").exists()  # the step never ran


def test_a_read_only_run_is_refused_too_when_its_record_could_not_be_written(env, monkeypatch):
    t = env["tmp"]
    log = t / "afifo"
    os.mkfifo(log)
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(log))
    p = _pb(t, [{"name": "w", "action": "wait", "args": {"seconds": 0.01}}])
    r = CliRunner().invoke(app, ["run", str(p)])
    assert r.exit_code == 2 and "nothing was done" in r.output, r.output


def test_a_mutating_run_appends_started_then_its_end_with_one_run_id_and_history_shows_it_once(env):
    t = env["tmp"]
    r = CliRunner().invoke(app, ["run", str(_pb(t, [_touch(t)], name="pbtouch"))])
    assert r.exit_code == 0, r.output
    start, end = _records(env)
    assert start["result"] == "started" and start["action"] == end["action"] == "run pbtouch"
    assert start["run"] == end["run"] and len(start["run"]) == 12
    assert start["inventory_name"] == end["inventory_name"] == "local"
    assert end["result"] == "ok" and end["steps"][0]["status"] == "passed"
    h = CliRunner().invoke(app, ["history"])  # the table folds a finished run's started record into its end
    assert h.exit_code == 0 and h.output.count("run pbtouch") == 1 and "unfinished" not in h.output, h.output


def test_the_started_record_is_written_before_the_first_step_runs(env):
    """The step itself reads the log: the started record is already there."""
    t = env["tmp"]
    step = {"name": "peek", "action": "shell", "args": {"role": "decode", "command": f"cat {env['audit']} > {t}/seen"}}
    r = CliRunner().invoke(app, ["run", str(_pb(t, [step], name="peek"))])
    assert r.exit_code == 0, r.output
    seen = [json.loads(x) for x in (t / "seen").read_text().splitlines()]
    assert [x["result"] for x in seen] == ["started"] and seen[0]["run"] == _records(env)[-1]["run"]


def test_a_killed_run_leaves_its_started_record_as_unfinished_in_history(env, monkeypatch):
    """A run that never reached its end (kill -9: simulated by a step that raises SystemExit past the runner)."""
    import dataclasses

    from pdctl.playbook.kinds import REGISTRY

    kind = REGISTRY["shell"]

    def killed(ctx, a):
        os.kill(os.getpid(), 0)
        raise SystemExit(137)  # not caught by the runner: only its "finally" runs, as a kill would not

    monkeypatch.setitem(REGISTRY, "shell", dataclasses.replace(kind, run=killed))
    monkeypatch.setattr("pdctl.playbook.runner._audit", lambda *a, **k: None)  # kill -9: no final record
    CliRunner().invoke(app, ["run", str(_pb(env["tmp"], [_touch(env["tmp"])], name="killed"))])
    assert [x["result"] for x in _records(env)] == ["started"]
    h = CliRunner().invoke(app, ["history"])
    assert "unfinished" in h.output and "run killed" in h.output


def test_a_run_with_no_mutating_step_to_run_writes_only_its_end(env):
    t = env["tmp"]
    steps = [
        {"name": "w", "action": "wait", "args": {"seconds": 0.01}},
        _touch(t, "later", when="apply"),
    ]  # mutating, but not run without --apply
    r = CliRunner().invoke(app, ["run", str(_pb(t, steps, name="ro"))])
    assert r.exit_code == 0, r.output
    recs = _records(env)
    assert [x["result"] for x in recs] == ["ok"] and recs[0]["run"]


def test_a_dry_run_writes_nothing(env):
    t = env["tmp"]
    r = CliRunner().invoke(app, ["run", str(_pb(t, [_touch(t)])), "--dry-run", "--json"])
    assert r.exit_code == 0, r.output
    assert not env["audit"].exists() and not (t / "touch-ran").exists()
