"""Only an action whose final-health ran and passed re-arms healing after a red heal (issue 28 re-pass): `pdctl
restart --pair --no-verify` ending ok re-armed it although no final-health ran (its record said `ok`, had no
`final_health`, and its args did not say `--no-verify`). restart, rolling and deploy now record `verify` in their
args; the ledger reads one rule for them and playbook runs (checks.heal_ledger.final_health_passed). Older records
that do not say are read as before.

The real CLI writes the records (real audit log, real deployment lock, nothing running): only the restart of the
processes and final-health itself are replaced, the audit record and the ledger are pdctl's own."""

from __future__ import annotations

import json
import time

import pytest
import yaml
from typer.testing import CliRunner

from pdctl import audit
from pdctl.checks.heal_ledger import final_health_passed, heal_end, heal_ledger
from pdctl.checks.result import CheckResult, Status
from pdctl.cli.app import app
from pdctl.ops import restart as restart_op
from pdctl.ops.verify import HealthReport
from tests.unit.heal_records import audit_env, inventory, write_heal

NAME = "heal-verify"


@pytest.fixture
def env(tmp_path, monkeypatch):
    """An inventory (nothing runs; restarting its processes is a no-op here), a real audit log with a red heal."""
    log = audit_env(tmp_path, monkeypatch)
    inv = tmp_path / "live.yaml"
    inv.write_text(yaml.safe_dump(inventory(NAME, 39120, heal_budget=False)))
    monkeypatch.setattr(restart_op, "ordered_restart", lambda dep, roles: [])
    monkeypatch.setattr(restart_op, "save_lineage_record", lambda dep: None)
    write_heal(inv, heal_end(ok=False), "red")
    return {"inv": inv, "log": log, "tmp": tmp_path}


def _red(env) -> bool:
    lines = audit.read_records(env["log"])
    return heal_ledger(lines, deployment=NAME, inventory=str(env["inv"]), now=time.time()).red is not None


def _last(env, action: str) -> dict:
    return [x for x in audit.read_records(env["log"]) if isinstance(x, dict) and x["action"] == action][-1]


def _health(ok: bool) -> HealthReport:
    status = Status.PASS if ok else Status.FAIL
    return HealthReport(NAME, {"e2e": [CheckResult("e2e", "router[0]", "probe", status)]})


def test_an_ok_restart_with_no_verify_rearms_nothing_and_its_record_says_so(env, monkeypatch):
    """The reproduction: after a red heal, `pdctl restart --pair --no-verify` ends ok: still red; the record's args
    say `verify: false`. The same restart with its final-health run and passed then re-arms."""
    r = CliRunner().invoke(app, ["restart", "--pair", "--no-verify", "--skip-lint", "-i", str(env["inv"])])
    assert r.exit_code == 0, r.output
    rec = _last(env, "restart --pair")
    assert rec["result"] == "ok" and rec["args"]["verify"] is False and "final_health" not in rec
    assert _red(env)

    monkeypatch.setattr(restart_op, "final_health", lambda dep: _health(True))
    r = CliRunner().invoke(app, ["restart", "--pair", "--skip-lint", "-i", str(env["inv"])])
    assert r.exit_code == 0, r.output
    rec = _last(env, "restart --pair")
    assert rec["args"]["verify"] is True and rec["final_health"]["ok"] is True
    assert not _red(env)


def test_a_red_final_health_or_a_no_verify_rolling_or_deploy_rearms_nothing_and_older_records_read_as_before(
    env, monkeypatch
):
    """The variant: the real CLI's restart whose final-health ran red (exit 1) re-arms nothing; nor do rolling or
    deploy records that say `verify: false`, nor an ok playbook run that ran no final-health (`final_health: null`).
    A record of an older pdctl (no `verify`, no `final_health`) re-arms, as it did."""
    monkeypatch.setattr(restart_op, "final_health", lambda dep: _health(False))
    r = CliRunner().invoke(app, ["restart", "--pair", "--skip-lint", "-i", str(env["inv"])])
    assert r.exit_code == 1, r.output
    assert _last(env, "restart --pair")["final_health"]["ok"] is False and _red(env)

    def line(action: str, **extra) -> str:
        when = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        rec = {"time": when, "operator": "o", "inventory": str(env["inv"]), "deployment": NAME, "action": action}
        return json.dumps({**rec, "args": {}, "result": "ok", "exit_code": 0, **extra}) + "\n"

    no_verify = [
        line("restart --rolling", args={"drain_timeout": 60.0, "skip_lint": False, "verify": False}),
        line("deploy", args={"dry_run": False, "skip_lint": False, "verify": False}),
        line("run co-restart", run="p1", final_health=None),  # its steps' records come first
    ]
    step = line("restart --pair", run="s1", playbook_run="p1", args={"verify": False})
    with env["log"].open("a") as f:
        f.writelines([*no_verify[:2], step, no_verify[2]])
    assert _red(env)
    with env["log"].open("a") as f:
        f.write(line("deploy", args={"dry_run": False, "skip_lint": False}))  # an older pdctl's record
    assert not _red(env)


@pytest.mark.parametrize(
    "record,passed",
    [
        ({"final_health": {"ok": True}}, True),
        ({"final_health": {"ok": False}}, False),
        ({"final_health": None}, False),
        ({"args": {"verify": False}}, False),
        ({"args": {"verify": True}}, None),  # a final-health that raised ends in an error record, never ok
        ({"args": {}}, None),
        ({"args": ["verify"]}, None),
    ],
)
def test_final_health_passed_reads_what_the_record_says(record: dict, passed):
    assert final_health_passed(record) is passed
