"""No worker's /metrics can be read (the workers are stopped): `verify final-health --layer inflight` says so at
once, as `verify inflight` does (exit 3, "nothing was sampled"), instead of sampling a window of unreadable samples
and calling that a failed check. The real CLI in a subprocess; the workers are closed ports on 127.0.0.1."""

from __future__ import annotations

import time

import pytest

from tests.e2e.helpers import local_inventory, pdctl, write_inventory
from tests.fixtures.net import closed_port

pytestmark = [pytest.mark.e2e]


def test_final_health_inflight_layer_stops_at_the_first_sample_as_verify_inflight(tmp_path):
    ports = {k: closed_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = str(write_inventory(tmp_path / "inv.yaml", local_inventory("inflight-unread", ports)))
    state = tmp_path / "state"
    alone = pdctl(["verify", "inflight", "-i", inv, "--json"], state=state, timeout=120)
    started = time.monotonic()
    layer = pdctl(["verify", "final-health", "-i", inv, "--layer", "inflight", "--json"], state=state, timeout=120)
    took = time.monotonic() - started
    assert alone.code == 3, alone.output
    assert layer.code == 3, layer.output
    assert took < 15, f"sampled for {took:.0f}s: the 30 s window of unreadable samples"  # no window was sampled
    a, b = alone.json()["error"], layer.json()["error"]
    assert b["kind"] == a["kind"] == "unreachable" and b["message"] == a["message"] and b["hint"] == a["hint"]
    assert f"prefill[0]@local:{ports['prefill']}" in b["message"] and "nothing was sampled" in b["hint"]
    screen = pdctl(["verify", "final-health", "-i", inv, "--layer", "inflight"], state=state, timeout=120)
    assert screen.code == 3 and "no worker's /metrics could be read" in screen.stderr
    assert "Traceback" not in screen.output
    both = pdctl(
        ["verify", "final-health", "-i", inv, "--layer", "health,inflight", "--json"], state=state, timeout=120
    )
    assert both.code == 3, both.output  # the layers judged before it are not lost silently: a warning says them
    assert any("judged before it: health FAIL" in w for w in both.json()["warnings"]), both.stdout
