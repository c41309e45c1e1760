"""`pdctl history` shows an override on the screen (issue 30): a restart run with --override-hazard (or a deploy
with --skip-lint, a watch service installed with --listen-any) has a mark on its action and the option named on
its row, at 80 columns as at 200; before, only --json said so. Records written by the real audit writer, read by
the real CLI."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

from pdctl import audit
from pdctl.cli.app import app
from pdctl.render.history import overrides


@pytest.fixture
def log(tmp_path, monkeypatch):
    path = tmp_path / "audit.jsonl"
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("PDCTL_INVENTORY", raising=False)
    return path


def _write(path, action, args, result="ok"):
    audit.append(action, inventory="<embedded default>", args=args, result=result, started=time.time(), path=path)


def _history(width: int) -> str:
    r = CliRunner().invoke(app, ["history"], env={"COLUMNS": str(width)})
    assert r.exit_code == 0, r.output
    return r.stdout


def _block_of(out: str, action: str) -> list[str]:
    """The lines of one record's block at 80 columns: its head line (time ... action) and the indented lines after."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if f" {action}" in ln and ln[:4].isdigit())
    end = next((i for i in range(start + 1, len(lines)) if lines[i][:4].isdigit()), len(lines))
    return lines[start:end]


def test_an_override_is_marked_on_its_action_and_named_at_80_columns(log):
    _write(log, "restart --role decode", {"roles": ["decode"], "override_hazard": True, "skip_lint": False})
    _write(log, "restart --pair", {"roles": ["prefill", "decode", "router"], "override_hazard": False})
    _write(log, "deploy", {"dry_run": False, "skip_lint": True, "verify": True}, result="final-health failed")
    out = _history(80)
    assert all(len(ln) <= 80 for ln in out.splitlines()), out
    forced = _block_of(out, "restart --role decode")
    assert "restart --role decode !" in forced[0], out  # the mark on the action's own line
    assert forced[1].split() == ["override:", "--override-hazard"], out  # named first, right under it
    deploy = _block_of(out, "deploy")
    assert "deploy !" in deploy[0] and deploy[1].split() == ["override:", "--skip-lint"], out
    assert any("failed: final-health failed" in ln for ln in deploy), out
    plain = _block_of(out, "restart --pair")
    assert "!" not in plain[0] and not any("override" in ln for ln in plain), out  # no override, no mark


def test_a_wide_screen_has_an_override_column_next_to_the_action(log):
    _write(log, "restart --role decode", {"override_hazard": True})
    _write(log, "restart --pair", {"override_hazard": False})
    out = _history(200)
    header = next(ln for ln in out.splitlines() if ln.startswith("time"))
    assert header.split()[:4] == ["time", "operator", "action", "override"], out
    row = next(ln for ln in out.splitlines() if "restart --role decode" in ln)
    assert "restart --role decode !" in row and "--override-hazard" in row, out
    assert "!" not in next(ln for ln in out.splitlines() if "restart --pair" in ln), out


def test_without_an_override_there_is_no_override_column(log):
    _write(log, "restart --pair", {"override_hazard": False, "skip_lint": False})
    out = _history(200)
    assert "override" not in out and "!" not in out, out


@pytest.mark.parametrize(
    "record, want",
    [
        ({"args": {"override_hazard": True}}, ["--override-hazard"]),
        ({"args": {"override_hazard": True, "skip_lint": True}}, ["--override-hazard", "--skip-lint"]),
        ({"args": {"argv": ["pdctl", "watch", "--listen", "0.0.0.0:9464", "--listen-any"]}}, ["--listen-any"]),
        ({"args": {"override_hazard": False, "skip_lint": False}}, []),
        ({"args": {"override_hazard": "yes"}}, []),  # not what a writer gives: read as no override
        ({"args": ["override_hazard"]}, []),
        ({}, []),
    ],
)
def test_overrides_read_from_the_record(record, want):
    assert overrides(record) == want
