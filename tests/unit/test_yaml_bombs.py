"""YAML reference bombs ("billion laughs"): a few hundred bytes of anchors and aliases that expand to 10^10 nodes are
refused by the loader (exit 2 naming the file) before anything walks them; ordinary aliases still load, and a
shared-structure document just under the cap validates quickly. Every load runs in a thread with a deadline, so a
regression fails the test instead of hanging the suite."""

from __future__ import annotations

import threading
import time

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.errors import InventoryError, PlaybookError
from pdctl.inventory import load_inventory
from pdctl.playbook.schema import load_playbook
from pdctl.yamlfile import MAX_ALIAS_NODES, MAX_ALIAS_USES

GOOD = "roles:\n  prefill: [{port: 30000}]\n  decode: [{port: 30002}]\n  router: [{port: 30001}]\n"


def _laughs(levels: int, width: int = 10, key: str = "x-") -> str:
    """`levels` anchors, each a list of `width` aliases of the one before: width**levels leaves."""
    lines = [f"{key}a: &a [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{key}{cur}: &{cur} [{', '.join([f'*{prev}'] * width)}]")
    return "\n".join(lines) + "\n"


def _bounded(fn, *args, limit: float = 5.0):
    box: dict = {}

    def run():
        try:
            box["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 -- handed to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t0 = time.monotonic()
    t.start()
    t.join(limit)
    assert not t.is_alive(), f"{fn.__name__}{args} still running after {limit}s"
    if "error" in box:
        raise box["error"]
    return box["value"], time.monotonic() - t0


def test_inventory_bomb_is_refused_naming_the_file(tmp_path):
    p = tmp_path / "inv.yaml"
    p.write_text(_laughs(10) + GOOD.replace("{port: 30002}", "{port: 30002, env: {X: *j}}"))
    assert p.stat().st_size < 1024
    with pytest.raises(InventoryError) as e:
        _bounded(load_inventory, p)
    assert e.value.exit_code == 2
    assert e.value.message.startswith(f"{p}: too many YAML aliases")
    assert f"more than {MAX_ALIAS_NODES} nodes" in e.value.message


def test_playbook_bomb_in_vars_is_refused_by_pdctl_run(tmp_path, monkeypatch):
    p = tmp_path / "pb.yaml"
    p.write_text(
        "name: pbb\nvars:\n"
        + "".join(f"  {ln}\n" for ln in _laughs(10, key="v").splitlines())
        + "steps:\n  - {name: w, action: wait, args: {seconds: 1}}\n"
    )
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    r, took = _bounded(CliRunner().invoke, app, ["run", str(p), "--dry-run"], limit=20)
    assert r.exit_code == 2, r.output
    assert f"{p}: too many YAML aliases" in r.output and "Traceback" not in r.output
    assert took < 5, took


def test_many_alias_uses_are_refused_even_when_each_is_small(tmp_path):
    p = tmp_path / "pb.yaml"
    p.write_text(
        "name: t\nvars:\n  one: &o 1\n  many: [" + ", ".join(["*o"] * (MAX_ALIAS_USES + 1)) + "]\n"
        "steps:\n  - {name: w, action: wait, args: {seconds: 1}}\n"
    )
    with pytest.raises(PlaybookError, match=f"too many YAML aliases: more than {MAX_ALIAS_USES} alias uses"):
        _bounded(load_playbook, p)


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path):
    p = tmp_path / "inv.yaml"
    p.write_text(GOOD + "x-loop: &l [1, *l]\n")
    with pytest.raises(InventoryError, match="a YAML alias refers to a node that contains it"):
        _bounded(load_inventory, p)


def test_ordinary_aliases_and_merges_still_load(tmp_path):
    p = tmp_path / "inv.yaml"
    p.write_text(
        "roles:\n  prefill: [&base {port: 30000, ready_timeout: 5, env: &env {A: '1', B: '2'}}]\n"
        "  decode: [{<<: *base, port: 30002, env: *env}]\n  router: [{port: 30001}]\n"
    )
    inv, _ = _bounded(load_inventory, p)
    assert [i.port for _r, _i, i in inv.instances()][:2] == [30000, 30002]
    assert [i.ready_timeout for _r, _i, i in inv.instances()][:2] == [5, 5]
    assert all(i.env == {"A": "1", "B": "2"} for _r, _i, i in inv.instances() if _r != "router")


def test_shared_structure_under_the_cap_loads_and_validates_fast(tmp_path):
    # 4 levels of width 17: 17**4 = 83521 leaves, under MAX_ALIAS_NODES; msgspec then walks the shared lists
    p = tmp_path / "pb.yaml"
    p.write_text(
        "name: t\nvars:\n"
        + "".join(f"  {ln}\n" for ln in _laughs(4, width=17, key="v").splitlines())
        + "steps:\n  - {name: w, action: wait, args: {seconds: 1}}\n"
    )
    pb, took = _bounded(load_playbook, p)
    assert len(pb.vars["vd"]) == 17 and pb.vars["vd"][0][0][0][0] == "lol"
    assert took < 3, took
    # one level more (17**5 leaves) is over the cap
    p.write_text(p.read_text().replace("steps:", "  ve: &e [" + ", ".join(["*d"] * 17) + "]\nsteps:"))
    with pytest.raises(PlaybookError, match="too many YAML aliases"):
        _bounded(load_playbook, p)
