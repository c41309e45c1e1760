"""The seed's wedge, seen without a human: a real local 1P1D (bundled engine, real sglang-router, free ports) with the
status-update-race drill; an aimed abort storm pins a room; `pdctl watch` judges it pinned and its exporter says
so; a real Prometheus (Debian's package, loopback, started and killed by the test) scrapes the watch with the
shipped rules, and PdctlInflightPinned fires, where it was not firing before the pin. The pin is made and judged
under a steady client load of 0.8 requests/s (queue counts alone would read busy)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.e2e.helpers import REPO, deployed, local_inventory, pdctl
from tests.e2e.test_watch import _scrape, _series, _timeline, _until
from tests.engine.test_storm_engine import DELAY, STORM
from tests.fixtures.client_load import ClientLoad
from tests.fixtures.net import free_port
from tests.fixtures.prometheus import Prometheus

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

# the default cadences, but a 10 s inflight window (20 s by default) to keep the test short
WATCH = {"inflight_window": 10}


@pytest.fixture(scope="module")
def racy(tmp_path_factory):
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    # the seed's router: the storm that makes the pin aborts through it, and smg 1.13 does not pass a client's
    # disconnect on to the workers (docs/storm-and-triage.md)
    inv = local_inventory(
        "watch-pin", ports, prefill_env={"PDCTL_DRILLS": f"status-update-race,{DELAY}"}, router_kind="sglang-router"
    )
    inv["watch"] = WATCH
    yield from deployed(tmp_path_factory, "watch-pin", inv)


def test_a_pin_is_judged_by_the_watch_and_fires_the_shipped_alert(racy, tmp_path):
    port, tl = free_port(), tmp_path / "timeline.jsonl"
    env = dict(os.environ, XDG_STATE_HOME=str(racy["state"]), COLUMNS="80", PDCTL_OPERATOR="test-operator")
    watch = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pdctl",
            "watch",
            "-i",
            str(racy["inv"]),
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
    try:
        with Prometheus({"pdctl-watch": [f"127.0.0.1:{port}"]}) as prom:
            prom.wait(lambda: set(prom.targets_up().values()) == {"up"}, 60, "the watch scraped")
            # a full inflight window drained, and the rules evaluated: no pin alert before the pin
            _until(
                "the watch's first conclusive inflight verdict",
                lambda: [x for x in _timeline(tl) if x.get("layer") == "inflight" and x.get("status") == "pass"],
                60,
            )
            prom.wait_evaluated()
            assert not prom.alerts("PdctlInflightPinned"), prom.alerts("PdctlInflightPinned")

            # under a steady client load: queue counts alone would read busy; the room balance says pinned
            with ClientLoad(f"http://127.0.0.1:{racy['data']['roles']['router'][0]['port']}", rate=0.8) as load:
                r = pdctl(
                    [
                        "storm",
                        "-i",
                        str(racy["inv"]),
                        "--json",
                        *STORM,
                        "--target",
                        "transfer-window",
                        "--requests",
                        "6",
                    ],
                    state=racy["state"],
                    timeout=300,
                )
                assert r.code in (0, 1), r.output
                assert r.json()["hits"]["hits"] >= 1, r.json()["hits"]
                _until(
                    "the exporter saying pinned",
                    lambda: set(_series(_scrape(port), "pdctl_inflight_pinned").values()) == {1.0},
                    90,
                )
                assert max(_series(_scrape(port), "pdctl_inflight_pinned_seconds").values()) > 0
                alert = prom.wait_alert("PdctlInflightPinned", timeout=90, deployment="watch-pin")
            assert load.summary()["ok"] >= 10, load.summary()  # the load flowed while the pin was judged
            assert alert["labels"]["severity"] == "critical"
            assert "pdctl triage" in alert["annotations"]["description"]
            pinned = [x for x in _timeline(tl) if x.get("layer") == "inflight" and x.get("status") == "fail"]
            assert pinned and "pinned" in pinned[0]["observed"], pinned
    finally:
        if watch.poll() is None:
            watch.terminate()
            watch.wait(20)
