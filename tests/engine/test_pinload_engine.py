"""A pin under steady load (issue 15 item 5), against real engine processes behind the real sglang-router, via the
real CLI. The status-update-race drill plus a transfer delay; a steady 0.8 requests/s client load runs throughout.

The load alone reads busy; an aimed storm (calibrated under that load) pins a room; then `verify inflight` and
`triage` call it pinned by the cross-side room balance while the load keeps flowing (queue counts alone read busy).
Bounded: each storm, window and command has its limit; the pin-making storm is tried at most five times.
"""

from __future__ import annotations

import time
import urllib.request

import pytest

from tests.e2e.helpers import deployed, local_inventory, pdctl
from tests.fixtures.client_load import ClientLoad
from tests.fixtures.net import free_port

pytestmark = [pytest.mark.engine]

DRILLS = "status-update-race,transfer-delay-ms=500"
# Aimed late in the first-token time: under this drill and load a room pins only when its abort lands in the last
# chunk's delayed transfer, about 0.8-0.95 of the first-token time (measured: 4-5 of 6 aborts there pinned, 2 of 6
# at the default 0.6-0.9). Two requests a storm, up to five storms: on a loaded machine the first-token time varies
# more and an aim lands less often (a CI run once saw three storms miss); a pin ends the tries at once.
AIMED = [
    "--target",
    "transfer-window",
    "--requests",
    "2",
    "--prompt-tokens",
    "3000",
    "--sample-every",
    "1",
    "--watch",
    "2",
    "--calibrate",
    "2",
    "--max-new-tokens",
    "32",
    "--aim-from",
    "0.78",
    "--aim-to",
    "0.95",
]
INF = "sglang:num_prefill_inflight_queue_reqs"


@pytest.fixture(scope="module")
def racy(tmp_path_factory):
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory(
        "pinload",
        ports,
        prefill_env={"PDCTL_DRILLS": DRILLS},
        # the seed's router: smg 1.13 does not pass a client's disconnect on to the workers
        # (docs/storm-and-triage.md), so the clients' aborts would never reach the rooms
        router_kind="sglang-router",
    )
    for dep in deployed(tmp_path_factory, "pinload", inv):
        yield dict(dep, ports=ports)


def prefill_inflight(ports) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{ports['prefill']}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(INF + "{"):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def held_for(ports, reads=8, every=0.6) -> bool:
    """The prefill inflight queue nonzero in every one of `reads` reads (the load alone empties it within ~2 s)."""
    for _ in range(reads):
        if prefill_inflight(ports) < 1:
            return False
        time.sleep(every)
    return True


def verify(dep, window):
    r = pdctl(
        ["verify", "inflight", "-i", str(dep["inv"]), "--window", str(window), "--interval", "1", "--json"],
        state=dep["state"],
        timeout=120,
    )
    return r, r.json()


def test_a_pin_under_steady_load_is_pinned_while_the_load_alone_is_busy(racy):
    with ClientLoad(f"http://127.0.0.1:{racy['ports']['router']}", rate=0.8) as load:
        time.sleep(3)
        r, doc = verify(racy, 10)
        assert r.code == 0 and doc["verdict"] == "busy", r.output
        assert doc["judgement"]["generation_tokens_delta"] > 0 and doc["extended_to_s"] is None
        assert doc["judgement"]["balance_median"] is not None and doc["judgement"]["balance_median"] < 1

        storms = []
        for seed in (7, 8, 9, 10, 11):  # an aimed storm of two requests; under load the calibration keeps its aim
            s = pdctl(
                ["storm", "-i", str(racy["inv"]), "--json", *AIMED, "--seed", str(seed)],
                state=racy["state"],
                timeout=300,
            )
            assert s.code in (0, 1), s.output
            storms.append(s.json())
            if held_for(racy["ports"]):
                break
        cal = [(d["calibration"]["ttft_s"], d["window_s"], d["hits"]["hits"]) for d in storms]
        print(f"\n[pinload] storms={len(storms)} calibration/window/hits={cal}")
        assert held_for(racy["ports"], reads=3), f"no pin after {len(storms)} aimed storm(s): {cal}"
        assert "background traffic" in " ".join(storms[-1]["calibration"]["notes"])

        r, doc = verify(racy, 10)
        assert r.code == 1 and doc["verdict"] == "pinned", r.output
        j = doc["judgement"]
        assert j["pinned_by"] == "room-balance" and j["conclusive"] and j["balance_median"] >= 1
        assert j["generation_tokens_delta"] > 0 and j["queue_changes"] > 0  # the load flowed all along
        assert doc["extended_to_s"] == 30 and any("past the 10s window" in n for n in doc["notes"])
        assert any(k.startswith("prefill[0]") for k in doc["holders"])

        t = pdctl(["triage", "-i", str(racy["inv"]), "--json"], state=racy["state"], timeout=180)
        tri = t.json()
        kinds = {f["kind"]: f for f in tri["findings"]}
        assert "pinned" in kinds, tri["findings"]
        assert "while traffic flows" in kinds["pinned"]["title"] and not tri["ok"]
    assert load.sent > 0
