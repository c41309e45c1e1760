"""The heal's memory is the audit log (issue 28, W2 and W3): a heal refused because another operator holds the
deployment lock is a refusal, not a failure, and never stops the next heal (a real lock, held by another process);
only a heal whose final-health really ran red does. The budget (`heal_max_per_hour`) and that red outcome are read
back from a real audit log file, so a watch started after another counts that one's heals."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from pdctl import audit
from pdctl.checks.heal_ledger import HEAL_ACTION, heal_end, heal_error_end, heal_ledger
from pdctl.errors import HazardRefused, LockHeld, StepFailed, UnreachableError
from pdctl.inventory import load_inventory
from pdctl.ops.context import Deployment
from pdctl.ops.heal import Healer
from pdctl.serialize import to_data
from tests.unit.heal_records import (
    audit_env,
    broken_pair_watch,
    heal_ended,
    heal_lines,
    inventory,
    lock_held,
    record_line,
    red_restart,
    write_heal,
)

NAME = "heal-ledger"  # the deployment's name, as the fixture's inventory declares it


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A 1P1D inventory on this machine (nothing runs: no heal here gets as far as a restart), a budget of one heal
    an hour, and a real audit log."""
    log = audit_env(tmp_path, monkeypatch)
    inv = tmp_path / "heal.yaml"
    inv.write_text(yaml.safe_dump(inventory(NAME, 39100)))
    return {"inv": inv, "log": log, "state": tmp_path / "state", "tmp": tmp_path}


def _records(log: Path, action: str = HEAL_ACTION) -> list[dict]:
    return [r for r in audit.read_records(log) if isinstance(r, dict) and r.get("action") == action]


# -- W2: a refusal is not a failure ------------------------------------------------------------------------------------


def test_a_heal_refused_by_a_lock_another_operator_holds_is_no_failure_and_the_next_heal_acts(env, monkeypatch):
    """The reproduction: another operator holds the deployment lock (a real lock, a live process); the heal is
    refused (said once, nothing recorded, nothing spent); when the lock is taken between the heal's look at it and
    its restart, the restart's LockHeld ends the heal "refused" (exit 4 in its record), never "failed"; once the
    lock is released the next heal is allowed: no "final-health is red" where no final-health ran."""
    with lock_held(env["inv"]) as holder, Deployment(load_inventory(env["inv"])) as dep:
        watch, lines = broken_pair_watch(dep)
        healer = Healer(dep, dry=False)
        healer(watch, "pairs")
        healer(watch, "pairs")  # the same refusal again: said once
        refused = heal_lines(lines, "refused")
        assert len(refused) == 1 and "deployment lock is held by" in refused[0].detail, lines
        assert f"pid {holder.pid}" in refused[0].detail
        assert not heal_lines(lines, "started") and _records(env["log"]) == []  # nothing done, nothing written

        # the race: the lock looked free, the restart finds it held (only this: the fixture's env stays set)
        with monkeypatch.context() as m:
            m.setattr(Healer, "_lock", lambda self: (None, None))
            healer(watch, "pairs")
            ended = heal_lines(lines, "refused")[-1]
            assert heal_lines(lines, "started") and not heal_lines(lines, "failed")
            assert "held by" in ended.observed and watch.state.heals.get("failed") is None  # an end says it there
            start, end = _records(env["log"])
            assert start["result"] == audit.STARTED and start["run"] == end["run"] and start["evidence"]["case"]
            assert end["outcome"] == "refused" and end["exit_code"] == 4 and end["final_health"] is None
            assert end["result"].startswith("LockHeld: ") and audit.result_word(end).word == "refused"
            assert healer.ledger.red is None and healer.ledger.heals_at == ()  # waited for, not spent
            # the evidence was kept (nothing was restarted): the case is still confirmed for the next round
            assert max(p.consecutive_failures for p in watch.state.pairs.values()) == 3
    assert holder.returncode == 0, holder.stderr.read() if holder.stderr else ""

    # the lock is free again: the next watch (and this one) would heal; dry says what it would do, and does nothing
    with Deployment(load_inventory(env["inv"])) as dep:
        watch, lines = broken_pair_watch(dep)
        Healer(dep, dry=True)(watch, "pairs")
        assert not heal_lines(lines, "refused")
        assert "would run `pdctl restart --pair`" in heal_lines(lines, "dry")[0].detail


def test_only_a_final_health_that_ran_red_stops_the_next_heal_and_an_operators_ok_restart_rearms_it(env):
    """The variant: a heal refused by a guard of its action, one stopped before its final-health and one that got
    no answer are no red; a red final-health stops the next watch's heal (read from the log) until an operator's
    restart of this deployment ends ok. The red heal's own restart record, written before its end, re-arms nothing."""
    inv = env["inv"]
    for n, e in enumerate(
        [
            HazardRefused("refused: a router would be left without a decode"),
            UnreachableError("gpu-1 did not answer", target="gpu-1"),
            StepFailed("stopped at step 'wait decode[0] ready'"),
        ]
    ):
        write_heal(inv, heal_error_end(e), f"e{n}")
    write_heal(inv, heal_end(ok=False, stopped="stopped at unit 1: canary failed", stopped_exit=1), "s1")
    with Deployment(load_inventory(inv)) as dep:
        assert Healer(dep, dry=False).ledger.red is None

        write_heal(inv, None, "red")  # the red heal: its start, its restart's own record, then its end
        red_restart(inv)
        heal_ended(inv, "red", heal_end(ok=False))
        watch, lines = broken_pair_watch(dep)
        healer = Healer(dep, dry=False)  # a new watch
        assert healer.ledger.red is not None and healer.ledger.red.run == "red"
        healer(watch, "pairs")
        assert "final-health is red" in heal_lines(lines, "refused")[0].detail

        audit.append("restart --pair", inventory="/elsewhere/other.yaml", result="ok", started=time.time())
        assert Healer(dep, dry=False).ledger.red is not None  # another deployment's restart re-arms nothing
        audit.append("restart --pair", inventory=str(inv), result="ok", started=time.time())
        assert Healer(dep, dry=False).ledger.red is None


# -- W3: the budget outlives the watch ---------------------------------------------------------------------------------


def test_a_watch_started_after_another_counts_its_heal_in_the_budget(env):
    """The reproduction: with a budget of one heal an hour, a watch started 3.5 minutes after another one healed
    does not heal again: it reads that heal from the audit log, says the budget is spent, and its exporter says so."""
    write_heal(env["inv"], heal_end(ok=True), "earlier")
    with Deployment(load_inventory(env["inv"])) as dep:
        watch, lines = broken_pair_watch(dep)
        healer = Healer(dep, dry=False, clock=lambda: time.time() + 210)
        healer(watch, "pairs")
        refused = heal_lines(lines, "refused")
        assert refused and "budget spent (1 in the last hour, at most 1)" in refused[0].detail, lines
        assert watch.state.heal_budget_exhausted and not heal_lines(lines, "started")
        assert [r["run"] for r in _records(env["log"])] == ["earlier", "earlier"]  # nothing more was done


def test_the_budget_counts_the_last_hour_of_this_deployment_and_a_killed_heal_but_no_lock_refusal(env, monkeypatch):
    """The variant, on the log's lines: a heal 61 minutes ago, another deployment's heal and a heal refused by the
    lock spend nothing; a heal whose watch was killed mid-way (no end) and one written before heals recorded their
    end do; a corrupt line is skipped."""
    inv = env["inv"]
    lock = heal_error_end(LockHeld("deployment lock /x on local is held by alice"))
    lines = [
        record_line(inv, HEAL_ACTION, audit.STARTED, 61 * 60, run="old"),
        record_line(inv, HEAL_ACTION, "ok", 60 * 60, **heal_end(ok=True).record_fields("old")),
        record_line(Path("/elsewhere/other.yaml"), HEAL_ACTION, audit.STARTED, 60, run="other"),
        record_line(inv, HEAL_ACTION, audit.STARTED, 50, run="lock"),
        record_line(inv, HEAL_ACTION, lock.result, 50, **lock.record_fields("lock")),
        "{not json\n",
    ]
    env["log"].write_text("".join(lines))
    now = time.time()
    parsed = audit.read_records(env["log"])
    assert heal_ledger(parsed, deployment=NAME, inventory=str(inv), now=now).heals_at == ()

    with env["log"].open("a") as f:
        f.write(record_line(inv, HEAL_ACTION, audit.STARTED, 40, run="killed"))
        f.write(record_line(inv, HEAL_ACTION, "evidence recorded; running `pdctl restart --pair`", 30))
    ledger = heal_ledger(audit.read_records(env["log"]), deployment=NAME, inventory=str(inv), now=now)
    assert len(ledger.heals_at) == 2 and ledger.red is None
    assert now - 41 <= ledger.heals_at[0] <= now - 39  # the budget's "next allowed in" counts from the oldest
    # the inventory as recorded (absolute) or as given (relative to here) is the same deployment
    monkeypatch.chdir(env["tmp"])
    assert (
        heal_ledger(audit.read_records(env["log"]), deployment=NAME, inventory=inv.name, now=now).heals_at
        == ledger.heals_at
    )


def test_an_audit_log_that_cannot_be_read_stops_the_heal_and_says_why(env):
    os.mkfifo(env["log"])
    with Deployment(load_inventory(env["inv"])) as dep:
        watch, lines = broken_pair_watch(dep)
        Healer(dep, dry=False)(watch, "pairs")
        refused = heal_lines(lines, "refused")
        assert refused and "cannot be counted" in refused[0].detail and str(env["log"]) in refused[0].detail


def test_a_heal_end_is_what_the_record_and_history_say():
    assert to_data(heal_end(ok=True).record_fields("r")) == {
        "run": "r",
        "outcome": "done",
        "final_health": "passed",
        "exit_code": 0,
        "spends_budget": True,
    }
    red = heal_end(ok=False)
    assert (red.outcome, red.final_health, red.exit_code) == ("failed", "red", 1)
    assert audit.result_word({"result": red.result, "exit_code": red.exit_code}).word == "failed"
    unreachable = heal_end(ok=False, stopped="stopped at step 'x': gpu-1 did not answer", stopped_exit=3)
    assert unreachable.final_health is None and audit.result_word(
        {"result": unreachable.result, "exit_code": unreachable.exit_code}
    ) == ("unreachable", "stopped: stopped at step 'x': gpu-1 did not answer")
