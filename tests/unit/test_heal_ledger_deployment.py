"""The heal's budget and its "last heal ran red" block belong to the deployment, not to the inventory file (issue 28,
W2/W3 re-pass): a record names the deployment as its inventory declares it (`deployment`), so heals and an operator's
restart through a copy of the inventory (`live_copy.yaml`, the same `name`) count. Records written before that field
existed are still matched by their path. On real audit log files, written by the real writer."""

from __future__ import annotations

import json
import shutil
import time

import pytest
import yaml

from pdctl import audit
from pdctl.checks.heal_ledger import HEAL_ACTION, heal_end
from pdctl.checks.watch_events import HealEvent
from pdctl.inventory import load_inventory
from pdctl.ops import restart as restart_op
from pdctl.ops.context import Deployment
from pdctl.ops.heal import Healer
from pdctl.ops.watch import Watch

NAME = "heal-copy"


def _inventory(name: str, port: int) -> dict:
    return {
        "name": name,
        "engine": "bundled",
        "hosts": {"local": {"transport": "local", "service_manager": "pidfile"}},
        "roles": {
            "prefill": [{"host": "local", "port": port, "bootstrap_port": port + 1}],
            "decode": [{"host": "local", "port": port + 2}],
            "router": [{"host": "local", "port": port + 3}],
        },
        "watch": {"heal_max_per_hour": 1, "heal_pair_failures": 3},
    }


@pytest.fixture
def env(tmp_path, monkeypatch):
    """live.yaml and its copy live_copy.yaml (one deployment), other.yaml (another deployment), a real audit log.
    Nothing runs: no heal here gets as far as a real restart."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    log = tmp_path / "audit.jsonl"
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(log))
    live = tmp_path / "live.yaml"
    live.write_text(yaml.safe_dump(_inventory(NAME, 39110)))
    copy = tmp_path / "live_copy.yaml"
    shutil.copy(live, copy)
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(_inventory("heal-other", 39120)))
    return {"live": live, "copy": copy, "other": other, "log": log}


def _broken_pair_watch(dep: Deployment) -> tuple[Watch, list]:
    """A real Watch whose state holds the pair-broken case (three failed canaries in a row), and its timeline."""
    watch = Watch(dep)
    lines: list = []
    watch.on_lines.append(lines.extend)
    p, d = dep.inv.label("prefill", 0), dep.inv.label("decode", 0)
    for t in (1.0, 2.0, 3.0):
        watch.state.apply_pairs([(p, d, "fail", None)], t)
    return watch, lines


def _heal_lines(lines: list, outcome: str) -> list[HealEvent]:
    return [x for x in lines if isinstance(x, HealEvent) and x.outcome == outcome]


def _red_heal(inv) -> None:
    """A heal whose final-health ran red, as Healer writes it: its start, its restart's own record, its end."""
    args = {"case": "pair-broken", "action": "restart --pair"}
    audit.append(HEAL_ACTION, inventory=str(inv), args=args, result=audit.STARTED, started=time.time(),
                 extra={"run": "red", "evidence": {}})  # fmt: skip
    audit.append("restart --pair", inventory=str(inv), result="final-health failed", started=time.time(),
                 extra={"exit_code": 1})  # fmt: skip
    audit.append(HEAL_ACTION, inventory=str(inv), args=args, result="final-health failed", started=time.time(),
                 extra=heal_end(ok=False).record_fields("red"))  # fmt: skip


def _red(inv) -> bool:
    with Deployment(load_inventory(inv)) as dep:
        return Healer(dep, dry=False).ledger.red is not None


def test_a_heal_through_a_copy_of_the_inventory_spends_the_deployments_budget(env, monkeypatch):
    """The reproduction: a watch on live_copy.yaml heals (its restart stood in for: the records are the Healer's
    own); a watch on live.yaml, budget one an hour, does not heal again: the budget is the deployment's."""
    monkeypatch.setattr(restart_op, "restart", lambda dep, roles: restart_op.RestartResult(roles, False, []))
    with Deployment(load_inventory(env["copy"])) as dep:
        watch, lines = _broken_pair_watch(dep)
        Healer(dep, dry=False)(watch, "pairs")
        assert [h.observed for h in _heal_lines(lines, "done")] == ["final-health passed"], lines
    records = [r for r in audit.read_records(env["log"]) if r.get("action") == HEAL_ACTION]
    assert [(r["inventory"], r["deployment"]) for r in records] == [(str(env["copy"]), NAME)] * 2
    monkeypatch.undo()

    with Deployment(load_inventory(env["live"])) as dep:
        watch, lines = _broken_pair_watch(dep)
        Healer(dep, dry=False, clock=lambda: time.time() + 210)(watch, "pairs")
        refused = _heal_lines(lines, "refused")
        assert refused and "budget spent (1 in the last hour, at most 1)" in refused[0].detail, lines
        assert not _heal_lines(lines, "started") and watch.state.heal_budget_exhausted
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

    def line(inv, action, result, **extra) -> str:
        when = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        rec = {"time": when, "operator": "o", "inventory": str(inv), "action": action, "args": {}, "result": result}
        return json.dumps({**rec, **extra}) + "\n"

    red = heal_end(ok=False)
    env["log"].write_text(
        line(env["live"], HEAL_ACTION, audit.STARTED, run="old")
        + line(env["live"], HEAL_ACTION, red.result, **red.record_fields("old"))
        + line(env["copy"], "restart --pair", "ok")  # through the copy: nobody can tell it is this deployment
    )
    assert _red(env["live"]) and not _red(env["copy"])  # the copy's own (old) records are the copy's
    with env["log"].open("a") as f:
        f.write(line(env["live"], "restart --pair", "ok"))
    assert not _red(env["live"])

    # a record says which deployment it was: the file it names saying another name today changes nothing
    with env["log"].open("a") as f:
        f.write(line(env["other"], HEAL_ACTION, audit.STARTED, run="named", deployment=NAME))
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
