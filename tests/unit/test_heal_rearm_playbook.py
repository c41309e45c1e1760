"""A playbook run that restarted or deployed the deployment re-arms healing after a heal whose final-health ran red
(issue 28, W2/W3 re-pass): `pdctl run co-restart`, the documented remedy. Its restart step appends its own
`restart --pair` record naming the run (`playbook_run`); that record ran no final-health (`verify: false`), so the
run's end decides: ok (and its last final-health not red) re-arms, a red final-health step does not. An ok run whose
steps restarted nothing (read-only, or a shell step) re-arms nothing.

fixtures/co_restart_audit.jsonl holds the records of two real runs of the shipped co-restart playbook against a
running bundled 1P1D deployment (`heal-red`), both through copies of its inventory: one that passed, one whose
final-health step failed (the copy declares an env the running decode lacks). `{copy}` and `{drift}` stand for the
two copies' paths."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pdctl import audit
from pdctl.checks.heal_ledger import HEAL_ACTION, heal_end, heal_ledger
from pdctl.cli.app import app
from tests.unit.heal_records import REPO, audit_env, inventory, lock_held, write_heal

CAPTURED = Path(__file__).parent / "fixtures" / "co_restart_audit.jsonl"
NAME = "heal-red"  # the captured deployment's name


@pytest.fixture
def env(tmp_path, monkeypatch):
    """live.yaml declaring the captured deployment, a real audit log, a red heal in it."""
    log = audit_env(tmp_path, monkeypatch)
    live = tmp_path / "live.yaml"
    live.write_text(yaml.safe_dump(inventory(NAME, 39200, heal_budget=False)))
    _red_heal(live, "red")
    return {"tmp": tmp_path, "live": live, "log": log}


def _red_heal(live: Path, run: str) -> None:
    """A heal whose final-health ran red, as Healer writes it: its start, then its end."""
    write_heal(live, heal_end(ok=False), run)


def _captured(copy: Path, drift: Path) -> list[str]:
    """The captured lines, the copies' paths as given."""
    text = CAPTURED.read_text().replace("{copy}", str(copy)).replace("{drift}", str(drift))
    return text.splitlines(keepends=True)


def _red(env) -> bool:
    ledger = heal_ledger(audit.read_records(env["log"]), deployment=NAME, inventory=str(env["live"]), now=time.time())
    return ledger.red is not None


def _append(env, lines: list[str]) -> None:
    with env["log"].open("a") as f:
        f.writelines(lines)


def test_an_ok_co_restart_run_rearms_healing_and_its_restart_steps_record_alone_does_not(env):
    """The reproduction: after a red heal, `pdctl run co-restart` (through a copy of the inventory) ended ok: healing
    is re-armed. Read before the run's end, its step's `restart --pair` ok (no final-health of its own) is not
    enough: the run was still to say how its final-health step went."""
    run_ok = _captured(env["tmp"] / "live_copy.yaml", env["tmp"] / "drift_copy.yaml")[:4]
    # run started, restart --pair started and ok, run ok
    assert [json.loads(x)["action"] for x in run_ok] == ["run co-restart", *["restart --pair"] * 2, "run co-restart"]
    assert _red(env)
    _append(env, run_ok[:3])
    assert _red(env)
    _append(env, run_ok[3:])
    assert not _red(env)


def test_a_co_restart_run_whose_final_health_step_failed_rearms_nothing(env):
    """The variant: the restart step ended ok, then the final-health step failed (run exit 1): still red, through
    a copy or through the inventory itself. So is an ok run's end whose restart came before the red heal."""
    for drift in (env["tmp"] / "drift_copy.yaml", env["live"]):
        env["log"].unlink()
        _red_heal(env["live"], "red")
        failed = _captured(env["live"], drift)[4:]
        assert json.loads(failed[-1])["exit_code"] == 1 and json.loads(failed[2])["result"] == "ok"
        _append(env, failed)
        assert _red(env), drift

    env["log"].unlink()  # an ok run that straddles a red heal: its restart came before the heal ran red
    run_ok = _captured(env["live"], env["live"])[:4]
    _append(env, run_ok[:3])
    _red_heal(env["live"], "red2")
    _append(env, run_ok[3:])
    assert _red(env)


def test_an_ok_playbook_run_that_restarted_nothing_rearms_nothing(env):
    """Read-only (a wait) and mutating but restarting nothing (a shell step): both end ok through the real runner;
    neither re-arms. After a run, the process's records no longer name it."""
    for name, step in [
        ("read-only", {"name": "w", "action": "wait", "args": {"seconds": 0.01}}),
        ("shell-only", {"name": "s", "action": "shell", "args": {"role": "decode", "command": "true"}}),
    ]:
        pb = env["tmp"] / f"{name}.yaml"
        pb.write_text(yaml.safe_dump({"name": name, "steps": [step]}))
        r = CliRunner().invoke(app, ["run", str(pb), "-i", str(env["live"])])
        assert r.exit_code == 0, r.output
    ends = [r for r in audit.read_records(env["log"]) if r["action"].startswith("run ") and r["result"] != "started"]
    assert [(r["action"], r["result"], r["deployment"]) for r in ends] == [
        ("run read-only", "ok", NAME),
        ("run shell-only", "ok", NAME),
    ]
    assert _red(env)
    assert "playbook_run" not in audit.append("restart --pair", inventory=str(env["live"]), result="x", started=0)


def test_a_restart_step_records_the_run_it_belongs_to(env):
    """Through the real CLI: a co-restart step refused by a lock another operator holds writes its own records,
    and they name the run; the run's own records do not. Refused: nothing re-arms."""
    with lock_held(env["live"]):
        r = subprocess.run(
            [sys.executable, "-m", "pdctl", "run", "co-restart", "-i", str(env["live"]), "--apply"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert r.returncode == 4, r.stdout + r.stderr
    recs = [x for x in audit.read_records(env["log"]) if x["action"] != HEAL_ACTION]
    run = recs[0]["run"]
    assert [(x["action"], x["result"].split(":")[0], x.get("playbook_run")) for x in recs] == [
        ("run co-restart", "started", None),
        ("restart --pair", "started", run),
        ("restart --pair", "LockHeld", run),
        ("run co-restart", "failed at step 1 'co-restart'", None),
    ]
    assert {x["deployment"] for x in recs} == {NAME} and _red(env)
