"""Issue 28, W6 through the CLI: one SSH host whose port nothing listens on (a real connect, refused: the host
does not answer) and the rest on this machine, where nothing is deployed (each server's port refuses: its host
answers, its server is dead). `verify pairs` canaries every pair whose hosts answer and fails the local one (exit 1,
not 3); the watch's pairs round does the same and marks unknown only the pair on the silent host. No engine."""

from __future__ import annotations

import json

import pytest

from tests.e2e.helpers import local_inventory, pdctl, silent_ssh_host, write_inventory
from tests.fixtures.net import free_port

pytestmark = [pytest.mark.e2e]


def _inventory(tmp_path, name: str, silent_role: str):
    """A local 1P1D plus one more `silent_role` worker on host 'gone' (its SSH port refuses connections)."""
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory(name, ports)
    inv["hosts"]["local"]["internal_address"] = "127.0.0.1"
    inv["hosts"]["gone"] = silent_ssh_host()
    for role in ("prefill", "decode"):
        inv["roles"][role][0]["listen_host"] = "0.0.0.0"
    inv["roles"][silent_role].append(dict(inv["roles"][silent_role][0], host="gone", port=free_port()))
    inv["watch"] = {"inflight_window": 2}
    return write_inventory(tmp_path / "inv.yaml", inv)


def test_verify_pairs_tests_the_pairs_whose_hosts_answer(tmp_path):
    """The reproduction: decode[1]'s host does not answer. Before, `verify pairs` exited 3 without a canary; now the
    local pair is canaried and fails, the other is unknown, and the failure decides the exit code."""
    path = _inventory(tmp_path, "pairs-gone", "decode")
    r = pdctl(["verify", "pairs", "-i", str(path), "--json"], state=tmp_path, timeout=60)
    assert r.code == 1, r.output
    doc = r.json()  # one document
    status = {p["name"]: p["status"] for p in doc["pairs"]}
    assert status == {"prefill[0] -> decode[0]": "fail", "prefill[0] -> decode[1]": "unknown"}
    local = doc["pairs"][0]
    assert "connection refused" in local["found"] and local["room"] is not None
    assert "host gone did not answer" in doc["pairs"][1]["found"] and doc["pairs"][1]["room"] is None
    assert doc["exit_code"] == 1 and doc["verdict"]["failed"] == ["prefill[0] -> decode[0]"]
    # nothing listens on the local pair's two workers: status first (are they running?), no restart
    assert doc["next_steps"] == [
        "pdctl status (both workers of each failed pair refused the canary: are they running?)",
        "pdctl triage (which failure, and what to do about it)",
    ]
    screen = pdctl(["verify", "pairs", "-i", str(path)], state=tmp_path, env={"COLUMNS": "80"}, timeout=60)
    assert screen.code == 1
    assert screen.stdout.startswith("verify pairs: FAIL (1 of 2 pair(s) failed: prefill[0] -> decode[0]; 1 unknown)")
    assert "failed pairs" in screen.stdout and "unknown pairs" in screen.stdout


def test_the_watch_fails_a_local_broken_pair_beside_a_host_that_does_not_answer(tmp_path):
    """The variant, in the watch (2P1D, prefill[1] on the silent host): prefill[0] -> decode[0] fails (before, every
    pair read unknown); only prefill[1] -> decode[0] is unknown; the watch exits 1."""
    path = _inventory(tmp_path, "watch-pairs-gone", "prefill")
    r = pdctl(
        ["watch", "-i", str(path), "--listen", f"127.0.0.1:{free_port()}", "--once", "--json"],
        state=tmp_path,
        timeout=60,
    )
    assert r.code == 1, r.output
    doc = json.loads(r.stdout)
    pairs = {c["target"]: c["status"] for c in doc["checks"] if c["layer"] == "pairs"}
    assert pairs == {"prefill[0] -> decode[0]": "fail"}
    assert "prefill[1] -> decode[0]" in doc["unknown_targets"]
    assert "prefill[0] -> decode[0]" not in doc["unknown_targets"]
    assert "host gone did not answer" in doc["unknown_why"]["prefill[1] -> decode[0]"]


def test_the_watch_and_final_health_agree_on_dead_workers_on_a_live_host(tmp_path):
    """Issue 28 W5 from its reproduction: the servers are dead (nothing deployed: each port refuses), the host
    (this machine) answers. `watch --once` failed its transfer checks as unknown where final-health failed them:
    now both fail `/metrics` of each worker, nothing is unknown, and both exit 1."""
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory("dead-on-live", ports)
    inv["watch"] = {"inflight_window": 2}
    path = write_inventory(tmp_path / "inv.yaml", inv)
    watch = pdctl(
        ["watch", "-i", str(path), "--listen", f"127.0.0.1:{free_port()}", "--once", "--json"],
        state=tmp_path,
        timeout=60,
    )
    final = pdctl(["verify", "final-health", "-i", str(path), "--json"], state=tmp_path, timeout=60)
    assert watch.code == final.code == 1, watch.output + final.output
    seen = {
        (c["target"], c["check"], c["status"]) for c in json.loads(watch.stdout)["checks"] if c["layer"] == "transfer"
    }
    judged = {(c["target"], c["name"], c["status"]) for c in final.json()["layers"]["transfer"]}
    workers = {f"prefill[0]@local:{ports['prefill']}", f"decode[0]@local:{ports['decode']}"}
    assert seen == judged == {(w, "/metrics", "fail") for w in workers}, (seen, judged)
    assert json.loads(watch.stdout)["unknown_targets"] == []
