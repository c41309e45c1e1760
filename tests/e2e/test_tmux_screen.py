"""`pdctl verify final-health` with a drifted flag, run in a real 80x24 terminal (a tmux pane, COLUMNS unset so pdctl
reads the pane's width): the failing flag, its expected value and its found value are all on the screen."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from tests.e2e.helpers import REPO, local_inventory, pdctl, write_inventory
from tests.engine.test_storm_engine import _kill_leftovers
from tests.fixtures.net import free_port

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


def tmux(socket: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True, timeout=10, check=True).stdout


def test_drifted_flag_is_readable_in_an_80x24_pane(deployment, tmp_path):
    data = {**deployment["data"], "roles": {**deployment["data"]["roles"]}}
    data["roles"]["decode"] = [{**data["roles"]["decode"][0], "args": {FLAG: 64}}]  # the live process has 96
    drifted = write_inventory(tmp_path / "drifted.yaml", data)
    done = tmp_path / "exit-code"
    env = {
        "XDG_STATE_HOME": str(deployment["state"]),
        "PDCTL_OPERATOR": "tmux-test",
        "PYTHONPATH": str(REPO),
        "TERM": "xterm-256color",
    }
    cmd = (
        f"cd {shlex.quote(str(REPO))} && env -u COLUMNS -u LINES "
        + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        + f" {shlex.quote(sys.executable)} -m pdctl verify final-health -i {shlex.quote(str(drifted))} --layer flags"
        f"; echo $? > {shlex.quote(str(done))}; sleep 60"
    )
    socket = f"pdctl-test-{os.getpid()}"
    tmux(socket, "new-session", "-d", "-x", "80", "-y", "24", "-s", "screen", cmd)
    try:
        deadline = time.monotonic() + 90
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert done.exists(), tmux(socket, "capture-pane", "-p", "-t", "screen")
        assert done.read_text().strip() == "1"
        assert tmux(socket, "display-message", "-p", "-t", "screen", "#{pane_width}x#{pane_height}").strip() == "80x24"
        lines = tmux(socket, "capture-pane", "-p", "-t", "screen").splitlines()
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=10)
    screen = "\n".join(lines)
    assert all(len(x.rstrip()) <= 80 for x in lines)
    assert any(x.startswith("final-health: FAIL") for x in lines), screen
    flag_line = next(x for x in lines if FLAG in x)  # the flag whole, on one line
    assert "FAIL" in flag_line, screen
    assert any("expected:" in x and "64" in x for x in lines), screen
    assert any("found:" in x and "96" in x for x in lines), screen
    assert any(x.lstrip().startswith("flags ") and "pass" in x for x in lines), screen  # the layer's summary
    assert "…" not in screen
