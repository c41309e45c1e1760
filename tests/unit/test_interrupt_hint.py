"""Ctrl-C's hint speaks of a lock and a record only when a mutating action recorded its interrupt (audit.audited):
`pdctl down` stopped under its lock names itself, while a read-only command, or a mutating one stopped before its
action began, gets no such hint (issue 28, C3's Ctrl-C wording beyond the watch). Real audit log and lock files in
a temporary state directory; the interrupt is raised where the op would be waiting."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.errors import Interrupted


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("PDCTL_OPERATOR", "unit-operator")
    monkeypatch.delenv("PDCTL_AUDIT_LOG", raising=False)
    monkeypatch.delenv("PDCTL_INVENTORY", raising=False)
    return tmp_path


def _records(env) -> list[dict]:
    log = env / "state" / "pdctl" / "audit.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("raised", [KeyboardInterrupt(), Interrupted("SIGTERM")], ids=["ctrl-c", "sigterm"])
def test_a_mutating_action_stopped_under_its_lock_says_it_recorded_where_it_stopped(env, monkeypatch, raised):
    from pdctl.ops import lifecycle

    held: list = []

    def interrupted(dep):
        held.extend((env / "state" / "pdctl" / "locks").iterdir())  # the real lock, taken before stopping
        raise raised

    monkeypatch.setattr(lifecycle, "ordered_stop", interrupted)
    r = CliRunner().invoke(app, ["down", "--json"])
    assert r.exit_code == 130, r.output
    error = json.loads(r.stdout)["error"]
    assert error["kind"] == "interrupted"
    assert error["hint"].startswith("`pdctl down` stopped at a safe point: it released the deployment lock")
    assert held and not any(p.exists() for p in held)  # released, as the hint says
    said = "interrupted by SIGTERM" if isinstance(raised, Interrupted) else "interrupted"
    assert [rec["result"] for rec in _records(env)] == ["started", said]


def test_a_read_only_command_interrupted_has_no_hint_of_a_mutating_action(env, monkeypatch):
    from pdctl.ops import verify

    def interrupted(dep, **_kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(verify, "final_health_with_baseline", interrupted)
    r = CliRunner().invoke(app, ["verify", "final-health"])
    assert r.exit_code == 130, r.output
    assert "interrupted by SIGINT (Ctrl-C)" in r.stderr
    assert "mutating" not in r.output and "lock" not in r.output and "hint:" not in r.output
    r = CliRunner().invoke(app, ["verify", "final-health", "--json"])  # the variant: the JSON document's hint
    assert r.exit_code == 130 and json.loads(r.stdout)["error"]["hint"] is None


def test_a_mutating_command_stopped_before_its_action_began_claims_no_record(env, monkeypatch):
    from pdctl.ops import lifecycle

    def interrupted(dep, **_kw):  # e.g. while the deployment is opened: nothing locked, nothing recorded
        raise KeyboardInterrupt

    monkeypatch.setattr(lifecycle, "down", interrupted)
    r = CliRunner().invoke(app, ["down"])
    assert r.exit_code == 130, r.output
    assert "safe point" not in r.output and "lock" not in r.output
    assert _records(env) == []


def test_an_interrupt_re_raised_with_what_the_op_left_keeps_the_record_mark(tmp_path, monkeypatch):
    """An op turns the interrupt into an Interrupted carrying each role's state (raise ... from None, outside the
    audited block): the mark put on the one audited recorded is found through the chain."""
    from pdctl import audit
    from pdctl.audit.writer import interrupt_recorded_by
    from pdctl.errors import as_interrupted

    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    with pytest.raises(Interrupted) as ei:
        try:
            with audit.audited("restart --pair", inventory="<embedded default>", args={}, mark_start=True):
                raise KeyboardInterrupt
        except KeyboardInterrupt as e:
            stopped = as_interrupted(e)
            stopped.role_states = {"prefill[0]": "running"}
            raise stopped from None
    assert interrupt_recorded_by(ei.value) == "restart --pair"
    assert interrupt_recorded_by(KeyboardInterrupt()) is None
