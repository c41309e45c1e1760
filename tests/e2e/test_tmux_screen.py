"""`pdctl verify final-health` with a drifted flag, run in a real 80x24 terminal (a tmux pane, COLUMNS unset so pdctl
reads the pane's width): the failing flag, its expected value and its found value are all on the screen."""

from __future__ import annotations

import shutil

import pytest

from tests.e2e.helpers import local_inventory, pdctl, write_inventory
from tests.engine.test_storm_engine import _kill_leftovers
from tests.fixtures.net import free_port
from tests.fixtures.tmux_pane import run_in_pane

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.engine,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed (scripts/install.sh)"),
]

FLAG = "--cuda-graph-max-bs-decode"


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    state = tmp_path_factory.mktemp("tmux-state")
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory("tmux", ports, decode_args={FLAG: 96})
    path = write_inventory(state / "inv.yaml", inv)
    try:
        r = pdctl(["deploy", "-i", str(path), "--no-verify", "--json"], state=state, timeout=400)
        assert r.code == 0, r.output
        yield {"state": state, "data": inv}
    finally:
        pdctl(["down", "-i", str(path)], state=state, timeout=120)
        _kill_leftovers(state)


def test_drifted_flag_is_readable_in_an_80x24_pane(deployment, tmp_path):
    data = {**deployment["data"], "roles": {**deployment["data"]["roles"]}}
    data["roles"]["decode"] = [{**data["roles"]["decode"][0], "args": {FLAG: 64}}]  # the live process has 96
    drifted = write_inventory(tmp_path / "drifted.yaml", data)
    env = {"XDG_STATE_HOME": str(deployment["state"]), "PDCTL_OPERATOR": "tmux-test"}
    run = run_in_pane(["verify", "final-health", "-i", str(drifted), "--layer", "flags"], env, tmp_path)
    assert run.code == 1 and run.size == "80x24", run.screen
    lines = run.lines
    screen = "\n".join(lines)
    assert all(len(x.rstrip()) <= 80 for x in lines)
    assert any(x.startswith("final-health: FAIL") for x in lines), screen
    flag_line = next(x for x in lines if FLAG in x)  # the flag whole, on one line
    assert "FAIL" in flag_line, screen
    assert "96" in flag_line and "(expected 64)" in screen, screen  # found, then expected, on the flag's line
    assert any(x.startswith("layers:") and "flags 1" in x for x in lines), screen  # the layer counts
    assert lines[0].startswith("final-health: FAIL") and lines[1].startswith("next: pdctl deploy --dry-run"), screen
    assert lines[-1].startswith("final-health: FAIL -- next: pdctl deploy --dry-run"), screen
    assert "…" not in screen
