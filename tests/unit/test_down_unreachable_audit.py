"""`pdctl down` that stops at a host that does not answer exits 3, and its audit record says so: result word
"unreachable" (with exit_code 3), found by `history --result unreachable`, not "failed"."""

from __future__ import annotations

import json

from tests.e2e.helpers import local_inventory, pdctl, write_inventory
from tests.fixtures.net import closed_port


def test_down_stopped_at_an_unreachable_ssh_host_is_audited_as_unreachable(tmp_path):
    ports = {k: closed_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    data = local_inventory("mixed", ports)
    data["hosts"]["gpu1"] = {
        "transport": "ssh",
        "address": "127.0.0.1",
        "port": closed_port(),
        "service_manager": "systemd",
        "python": "/usr/bin/python3",
        "http": "tunnel",
        "connect_timeout": 3,
    }
    data["hosts"]["local"]["internal_address"] = "127.0.0.2"  # two hosts: each role reachable from the other
    data["hosts"]["gpu1"]["internal_address"] = "127.0.0.3"
    data["roles"]["decode"][0].update(host="gpu1", listen_host="0.0.0.0")
    data["roles"]["prefill"][0]["listen_host"] = "0.0.0.0"
    inv = write_inventory(tmp_path / "mixed.yaml", data)
    r = pdctl(["down", "-i", str(inv)], state=tmp_path, timeout=120)
    assert r.code == 3, r.output
    assert "stopped at step 'stop decode[0]@gpu1" in r.stderr and "unreachable" in r.stderr
    (end,) = [
        x
        for x in map(json.loads, (tmp_path / "pdctl" / "audit.jsonl").read_text().splitlines())
        if x["result"] != "started"
    ]
    assert end["action"] == "down" and end["exit_code"] == 3
    h = pdctl(["history", "--result", "unreachable"], state=tmp_path)
    assert h.code == 0 and "down" in h.stdout and "unreachable: stopped at step" in h.stdout, h.output
    h = pdctl(["history", "--result", "failed"], state=tmp_path)
    assert h.code == 0 and "no records match" in h.stdout, h.output
