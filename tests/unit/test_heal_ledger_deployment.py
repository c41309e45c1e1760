"""The heal's budget and its "last heal ran red" block belong to the deployment, not to the inventory file (issue 28,
W2/W3 re-pass): a record names the deployment as its inventory declares it (`deployment`), so heals and an operator's
restart through a copy of the inventory (`live_copy.yaml`, the same `name`) count. Records written before that field
existed are still matched by their path. On real audit log files, written by the real writer."""

from __future__ import annotations

import shutil
import time

import pytest
import yaml

from pdctl import audit
from pdctl.checks.heal_ledger import HEAL_ACTION, heal_end
from pdctl.inventory import load_inventory
from pdctl.ops import restart as restart_op
from pdctl.ops.context import Deployment
from pdctl.ops.heal import Healer
from tests.unit.heal_records import (
    audit_env,
    broken_pair_watch,
    heal_ended,
    heal_lines,
    heal_started,
    inventory,
    record_line,
    red_restart,
)

NAME = "heal-copy"


@pytest.fixture
def env(tmp_path, monkeypatch):
    """live.yaml and its copy live_copy.yaml (one deployment), other.yaml (another deployment), a real audit log.
    Nothing runs: no heal here gets as far as a real restart."""
    log = audit_env(tmp_path, monkeypatch)
    live = tmp_path / "live.yaml"
    live.write_text(yaml.safe_dump(inventory(NAME, 39110)))
    copy = tmp_path / "live_copy.yaml"
    shutil.copy(live, copy)
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(inventory("heal-other", 39120)))
    return {"live": live, "copy": copy, "other": other, "log": log}


def _red_heal(inv) -> None:
    """A heal whose final-health ran red, as Healer writes it: its start, its restart's own record, its end."""
    heal_started(inv, "red")
    red_restart(inv)
    heal_ended(inv, "red", heal_end(ok=False))


def _red(inv) -> bool:
    with Deployment(load_inventory(inv)) as dep:
        return Healer(dep, dry=False).ledger.red is not None


def test_a_heal_through_a_copy_of_the_inventory_spends_the_deployments_budget(env, monkeypatch):
    """The reproduction: a watch on live_copy.yaml heals (its restart stood in for: the records are the Healer's
    own); a watch on live.yaml, budget one an hour, does not heal again: the budget is the deployment's."""
    with monkeypatch.context() as m:  # only the restart: the fixture's state and audit log stay this test's
        m.setattr(restart_op, "restart", lambda dep, roles: restart_op.RestartResult(roles, False, []))
        with Deployment(load_inventory(env["copy"])) as dep:
            watch, lines = broken_pair_watch(dep)
            Healer(dep, dry=False)(watch, "pairs")
            assert [h.observed for h in heal_lines(lines, "done")] == ["final-health passed"], lines
        records = [r for r in audit.read_records(env["log"]) if r.get("action") == HEAL_ACTION]
        assert [(r["inventory"], r["deployment"]) for r in records] == [(str(env["copy"]), NAME)] * 2

    with Deployment(load_inventory(env["live"])) as dep:
        watch, lines = broken_pair_watch(dep)
        Healer(dep, dry=False, clock=lambda: time.time() + 210)(watch, "pairs")
        refused = heal_lines(lines, "refused")
        assert refused and "budget spent (1 in the last hour, at most 1)" in refused[0].detail, lines
        assert not heal_lines(lines, "started") and watch.state.heal_budget_exhausted
    # another deployment's budget is its own
    with Deployment(load_inventory(env["other"])) as dep:
        assert Healer(dep, dry=False).ledger.heals_at == ()


def test_an_operators_restart_through_a_copy_rearms_after_a_red_heal_and_another_deployments_does_not(env):
    """The reproduction's other half and its variant: after a heal on live.yaml ran red, `restart --pair` through
    live_copy.yaml (recorded as the restart command records itself) re-arms healing; another deployment's ok
    restart does not; a red heal through the copy blocks a watch on live.yaml."""
    _red_heal(env["live"])
    assert _red(env["live"]) and _red(env["copy"])  # one deployment, whichever file its watch was given

    with audit.audited("restart --pair", inventory=str(env["other"]), args={}, mark_start=True) as rec:
        rec.result = "ok"
    assert _red(env["live"])
    with audit.audited("restart --pair", inventory=str(env["copy"]), args={}, mark_start=True) as rec:
        rec.result = "ok"
    ends = [r for r in audit.read_records(env["log"]) if r.get("action") == "restart --pair" and r["result"] == "ok"]
    assert [r["deployment"] for r in ends] == ["heal-other", NAME]
    assert not _red(env["live"]) and not _red(env["copy"])

    _red_heal(env["copy"])  # the variant: the red heal went through the copy
    assert _red(env["live"])


def test_records_written_before_they_named_the_deployment_are_matched_by_their_path(env):
    """The fallback: a record without `deployment` counts for the file it names (as given or resolved), not for a
    copy of it; a record that names its deployment is judged by that name, whatever file it was written through."""

    red = heal_end(ok=False)
    env["log"].write_text(
        record_line(env["live"], HEAL_ACTION, audit.STARTED, run="old")
        + record_line(env["live"], HEAL_ACTION, red.result, **red.record_fields("old"))
        + record_line(env["copy"], "restart --pair", "ok")  # through the copy: nobody can tell it is this deployment
    )
    assert _red(env["live"]) and not _red(env["copy"])  # the copy's own (old) records are the copy's
    with env["log"].open("a") as f:
        f.write(record_line(env["live"], "restart --pair", "ok"))
    assert not _red(env["live"])

    # a record says which deployment it was: the file it names saying another name today changes nothing
    with env["log"].open("a") as f:
        f.write(record_line(env["other"], HEAL_ACTION, audit.STARTED, run="named", deployment=NAME))
    with Deployment(load_inventory(env["live"])) as dep:
        assert len(Healer(dep, dry=False).ledger.heals_at) == 2  # "old" and "named"
    with Deployment(load_inventory(env["other"])) as dep:
        assert Healer(dep, dry=False).ledger.heals_at == ()


def test_history_finds_a_deployments_records_by_name_once_its_file_is_gone(env):
    """`history -i NAME` reads the name each record holds: every file it was written through may be gone."""
    audit.append("restart --pair", inventory=str(env["copy"]), result="ok", started=time.time())
    audit.append("restart --pair", inventory="<embedded default>", result="ok", started=time.time())
    env["copy"].unlink()
    lines = audit.read_records(env["log"])
    assert [r["inventory"] for r in audit.query(lines, inventory=NAME)] == [str(env["copy"])]
    assert [r["deployment"] for r in audit.query(lines, inventory="local")] == ["local"]
