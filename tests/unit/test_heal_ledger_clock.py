"""A heal dated in the future (issue 28 re-pass): the clock stepped back (a day) after a heal was recorded, so its
record's time is ahead of now. It counted in the hour's budget, and blocked healing until an hour past its time.
Records dated more than AHEAD_TOLERANCE_S ahead are not counted and the ledger says so; within it (two clocks a
little apart) they count. Real audit log files, a real Healer of a real Watch (--heal=dry: nothing is run)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from pdctl import audit
from pdctl.checks.heal_ledger import AHEAD_TOLERANCE_S, HEAL_ACTION, heal_end, heal_ledger
from pdctl.checks.watch_events import HealEvent
from pdctl.inventory import load_inventory
from pdctl.ops.context import Deployment
from pdctl.ops.heal import Healer
from tests.unit.heal_records import audit_env, broken_pair_watch, heal_lines, inventory

NAME = "heal-clock"


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A 1P1D inventory (nothing runs), a budget of one heal an hour, a real audit log."""
    log = audit_env(tmp_path, monkeypatch)
    inv = tmp_path / "heal.yaml"
    inv.write_text(yaml.safe_dump(inventory(NAME, 39110)))
    return {"inv": inv, "log": log}


def _heal_at(log: Path, inv: Path, run: str, at: float) -> None:
    """One heal's two records (start, ok end), as a heal writes them, dated `at` (epoch seconds)."""
    when = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(at))
    base = {"time": when, "operator": "o", "inventory": str(inv), "deployment": NAME, "action": HEAL_ACTION, "args": {}}
    with log.open("a") as f:
        f.write(json.dumps({**base, "result": audit.STARTED, "run": run}) + "\n")
        f.write(json.dumps({**base, "result": "ok", **heal_end(ok=True).record_fields(run)}) + "\n")


def _dry_heal_lines(inv: Path) -> list[HealEvent]:
    """What a new watch's heal (--heal=dry) says of a confirmed pair-broken case."""
    with Deployment(load_inventory(inv)) as dep:
        watch, lines = broken_pair_watch(dep)
        Healer(dep, dry=True)(watch, "pairs")
    return heal_lines(lines)


def test_a_heal_dated_a_day_ahead_spends_no_budget_and_is_said(env):
    """The reproduction: a heal recorded 24 h ahead of now (the clock stepped back). It is not in the budget, the
    ledger says why; a new watch's heal would act (dry), not 'budget spent'."""
    now = time.time()
    _heal_at(env["log"], env["inv"], "future", now + 24 * 3600)
    ledger = heal_ledger(audit.read_records(env["log"]), deployment=NAME, inventory=str(env["inv"]), now=now)
    assert ledger.heals_at == () and len(ledger.ahead) == 1
    note = ledger.ahead_note(now)
    assert note is not None and "1 heal in the audit log dated up to 24.0h ahead" in note and "not counted" in note
    events = _dry_heal_lines(env["inv"])
    assert [e.outcome for e in events] == ["dry"], events
    assert "budget" not in events[0].detail


@pytest.mark.parametrize(
    "ahead_s,counted",
    [(AHEAD_TOLERANCE_S - 60, True), (AHEAD_TOLERANCE_S + 60, False), (2 * 3600, False), (-30 * 60, True)],
)
def test_a_heal_a_little_ahead_counts_and_one_further_ahead_does_not(env, ahead_s, counted):
    """The variant: within the tolerance (clocks a little apart) a heal ahead still spends the budget (refused);
    beyond it, not (dry: would act). One half an hour ago counts as before."""
    now = time.time()
    _heal_at(env["log"], env["inv"], "h", now + ahead_s)
    ledger = heal_ledger(audit.read_records(env["log"]), deployment=NAME, inventory=str(env["inv"]), now=now)
    assert (len(ledger.heals_at), len(ledger.ahead)) == ((1, 0) if counted else (0, 1))
    assert (ledger.ahead_note(now) is None) == counted
    events = _dry_heal_lines(env["inv"])
    assert [e.outcome for e in events] == ["refused" if counted else "dry"], events
    if counted:
        assert "heal budget spent (1 in the last hour, at most 1)" in events[0].detail
