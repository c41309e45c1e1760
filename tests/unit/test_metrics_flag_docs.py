"""Issue 28, C6: docs/lint.md said `args: {--enable-metrics: false}` removes the flag, which the inventory refuses.
The refusal is what the user needs (final-health and the watch read /metrics), so the docs and lint's own fix now
say so; the refusal is checked through the real CLI (exit 2, one JSON document naming the field)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pdctl.checks.lint_safety import judge_worker_safety
from pdctl.errors import InventoryError
from pdctl.inventory import embedded_default, parse_inventory
from tests.e2e.helpers import REPO, pdctl, write_inventory


def _section(rule: str) -> str:
    text = (Path(REPO) / "docs" / "lint.md").read_text()
    return re.search(rf"^### `{rule}`\n(.*?)(?=^### |\Z)", text, re.M | re.S).group(1)


def _with_decode_args(args: dict) -> dict:
    data = embedded_default().dump()
    data["roles"]["decode"][0]["args"] = args
    return data


def test_the_docs_say_the_inventory_refuses_turning_metrics_off_and_it_does(tmp_path):
    section = " ".join(_section("metrics-off").split())
    assert "only `args: {--enable-metrics: false}` removes it" not in section
    assert "refuses to turn it off (`args: {--enable-metrics: false}` is an inventory error" in section
    (tmp_path / "state").mkdir()
    inv = write_inventory(tmp_path / "inv.yaml", _with_decode_args({"--enable-metrics": False}))
    run = pdctl(["lint", "-i", str(inv), "--json"], state=tmp_path / "state", timeout=60)
    assert run.code == 2, run.output
    err = json.loads(run.stdout)["error"]
    assert "roles.decode.0.args.--enable-metrics" in err["message"] and "always on" in err["message"]


@pytest.mark.parametrize("key", ["--enable-metrics=false", "--enable-m"])
def test_other_spellings_of_turning_it_off_are_refused_too(key):
    with pytest.raises(InventoryError, match=re.escape(f"roles.decode.0.args.{key}")):
        parse_inventory(_with_decode_args({key: False}), "inv.yaml")


def test_lints_fix_for_a_line_without_the_flag_is_a_redeploy_not_an_args_setting():
    (f,) = judge_worker_safety("decode[0]", {}, {"enable_metrics": False, "tp_size": 1}, None)
    assert f.rule == "metrics-off" and "pdctl deploy" in f.fix and "args" not in f.fix
