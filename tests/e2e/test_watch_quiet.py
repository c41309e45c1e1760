"""No false alarm, no heal: a real local 1P1D without the race drill (the fixed build: aborts release their rooms),
a steady client load of 0.8 requests/s and a random abort storm, watched by `pdctl watch --heal on` and a real
Prometheus with the shipped rules for a bounded time: no alert fires, no heal is tried, the watch never says pinned."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.e2e.helpers import REPO, deployed, local_inventory, pdctl
from tests.e2e.test_watch import _scrape, _series, _timeline, _until
from tests.engine.test_storm_engine import DELAY, STORM
from tests.fixtures.client_load import ClientLoad
from tests.fixtures.net import free_port
from tests.fixtures.prometheus import Prometheus

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

QUIET_S = 45  # watched after the storm, under the load


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory("watch-quiet", ports, prefill_env={"PDCTL_DRILLS": DELAY})
    inv["watch"] = {"inflight_window": 10, "pairs_every": 10, "e2e_every": 10}
    yield from deployed(tmp_path_factory, "watch-quiet", inv)


def test_healthy_load_and_a_random_storm_raise_no_alert_and_no_heal(fixed, tmp_path):
    port, tl = free_port(), tmp_path / "timeline.jsonl"
    env = dict(os.environ, XDG_STATE_HOME=str(fixed["state"]), COLUMNS="80", PDCTL_OPERATOR="test-operator")
    watch = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pdctl",
            "watch",
            "-i",
            str(fixed["inv"]),
            "--heal",
            "on",
            "--listen",
            f"127.0.0.1:{port}",
            "--timeline",
            str(tl),
            "--for",
            "300",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pinned_seen, fired = [], []
    try:
        with (
            Prometheus({"pdctl-watch": [f"127.0.0.1:{port}"]}) as prom,
            ClientLoad(f"http://127.0.0.1:{fixed['data']['roles']['router'][0]['port']}", rate=0.8) as load,
        ):
            prom.wait(lambda: set(prom.targets_up().values()) == {"up"}, 60, "the watch scraped")
            _until("the watch's first pair canary", lambda: _series(_scrape(port), "pdctl_pair_ok"), 60)
            r = pdctl(
                ["storm", "-i", str(fixed["inv"]), "--json", *STORM, "--requests", "6"],
                state=fixed["state"],
                timeout=300,
            )
            assert r.code in (0, 1), r.output
            assert r.json()["hits"]["aborted"] >= 1, r.json()["hits"]  # the storm did abort requests
            end = time.monotonic() + QUIET_S
            while time.monotonic() < end:
                pinned_seen += [v for v in _series(_scrape(port), "pdctl_inflight_pinned").values() if v]
                fired += [a for a in prom.alerts() if a["state"] == "firing"]
                time.sleep(1)
            summary = load.summary()
    finally:
        if watch.poll() is None:
            watch.terminate()
            watch.wait(20)
    assert not fired, fired
    assert not pinned_seen
    heals = [x for x in _timeline(tl) if x.get("event") == "heal"]
    assert not heals, heals
    assert summary["sent"] >= 40 and len(summary["failed"]) <= summary["sent"] // 10, summary
