"""The embedded default (deploy, final-health, restart --pair) inside a network namespace that has only loopback:
proof that nothing in the stack (engine, NIXL/UCX, router, tokenizer) reaches for the network."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.e2e.helpers import pdctl
from tests.fixtures.netns import owned_netns_name

pytestmark = [pytest.mark.e2e, pytest.mark.engine]


@pytest.fixture
def netns():
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("network namespaces need root and iproute2")
    name = owned_netns_name()
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True)
        links = subprocess.run(["ip", "netns", "exec", name, "ip", "-o", "link"], capture_output=True, text=True).stdout
        assert [line.split(":")[1].strip() for line in links.splitlines()] == ["lo"]
        yield name
    finally:
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split()
        for pid in pids:  # only processes inside our own namespace: all started by this test
            subprocess.run(["kill", "-9", pid], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], check=False)


def test_embedded_default_in_loopback_only_namespace(netns, tmp_path):
    env = {"HF_HUB_OFFLINE": "0", "NO_PROXY": "*"}  # would let a hub lookup try; there is no route for it
    dep = pdctl(["deploy", "--json"], state=tmp_path, netns=netns, env=env)
    try:
        assert dep.code == 0, dep.output
        assert dep.json()["final_health"]["ok"]
        fh = pdctl(["verify", "final-health"], state=tmp_path, netns=netns)
        assert fh.code == 0, fh.output
        pair = pdctl(["restart", "--pair", "--json"], state=tmp_path, netns=netns)
        assert pair.code == 0, pair.output
        assert pair.json()["final_health"]["ok"]
    finally:
        pdctl(["down"], state=tmp_path, netns=netns, timeout=120)
