"""pdctl across three machines made of network namespaces: the operator (`op`), `hosta` (prefill) and `hostb`
(decode + router), each host with its own real sshd, joined by veths on a bridge, addressed in a private range that
exists only inside these namespaces (tests/fixtures/netns.py). pdctl runs inside `op`; every engine, router and
sshd process runs inside its host's namespace; the KV cache crosses from hosta to hostb over NIXL/UCX on the veth.

Flow: deploy -> final-health (all layers) -> final-health again with HTTP through SSH tunnels -> restart --pair ->
final-health -> down. The namespaces (and everything in them) are removed even when the test fails.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.e2e.helpers import REPO, pdctl, write_inventory
from tests.engine.stack import server_pids
from tests.fixtures.netns import can_make_namespaces, netns_lab, netns_sshd

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

PORTS = {"prefill": 30000, "bootstrap": 8998, "decode": 30002, "router": 30001, "prometheus": 29000}
# The namespaces share one kernel, so UCX would see the peer as "intra-node" and move the KV with CMA
# (process_vm_writev), never touching the veth. Real separate hosts cannot; UCX_TLS=tcp makes the test honest.
UCX_ENV = {"UCX_TLS": "tcp"}
LAYERS = ("health", "e2e", "transfer", "flags", "lineage")


def _host(server, state_dir, *, http: str) -> dict:
    return {
        "transport": "ssh",
        "address": server.address,
        "internal_address": server.address,
        "port": server.port,
        "user": server.user,
        "key": server.key_path,
        "known_hosts": server.known_hosts,
        "ssh_config": "none",
        "connect_timeout": 5,
        "http": http,
        "service_manager": "pidfile",
        "python": sys.executable,
        "state_dir": str(state_dir),
        "workdir": str(REPO),
    }


def _inventory(lab, sshds, tmp, *, http: str) -> dict:
    return {
        "name": "multihost",
        "engine": "bundled",
        "hosts": {
            "hosta": _host(sshds["hosta"], tmp / "hosta-state", http=http),
            "hostb": _host(sshds["hostb"], tmp / "hostb-state", http=http),
        },
        "roles": {
            # Prefill listens on every interface: pdctl sets SGLANG_HOST_IP to hosta's internal address, which the
            # engine advertises to decode as its KV rank address (a wildcard would send decode to its own host).
            "prefill": [
                {
                    "host": "hosta",
                    "port": PORTS["prefill"],
                    "listen_host": "0.0.0.0",
                    "bootstrap_port": PORTS["bootstrap"],
                    "ready_timeout": 60,
                    "env": {**UCX_ENV, "UCX_PROTO_INFO": "y"},
                }
            ],
            # decode and router on all interfaces: the router reaches decode on hostb's loopback, and the operator
            # (http: direct) reaches both at hostb's address.
            "decode": [
                {
                    "host": "hostb",
                    "port": PORTS["decode"],
                    "listen_host": "0.0.0.0",
                    "ready_timeout": 60,
                    "env": UCX_ENV,
                    "args": {"--disable-overlap-schedule": True},
                }
            ],
            "router": [
                {
                    "host": "hostb",
                    "port": PORTS["router"],
                    "listen_host": "0.0.0.0",
                    "ready_timeout": 60,
                    "args": {"--prometheus-port": PORTS["prometheus"], "--health-check-interval-secs": 2},
                }
            ],
        },
        "final_health": {"probe": {"timeout": 20}},
    }


def _assert_all_layers_pass(run, what: str) -> dict:
    assert run.code == 0, f"{what}: exit {run.code}\n{run.output}"
    report = run.json()
    report = report.get("final_health", report)
    assert report["ok"], f"{what}: {report}"
    for name in LAYERS:
        rows = report["layers"].get(name)
        assert rows, f"{what}: layer {name} is empty: {report['layers'].keys()}"
        assert {r["status"] for r in rows} == {"pass"}, f"{what}: layer {name}: {rows}"
    return report


def _tcp_between(lab, host: str, local: str, peer: str) -> list[str]:
    """Established TCP connections in `host`'s namespace from `local` to `peer` (asked with ss, no traffic)."""
    out = lab.run(host, ["ss", "-Htnp", "state", "established", f"src {local}", f"dst {peer}"]).stdout
    return [line for line in out.splitlines() if line.strip()]


def _pid(path) -> str:
    return str(json.loads(path.read_text())["pid"])


def _rx_bytes(lab, host: str) -> int:
    out = lab.run(host, ["cat", "/sys/class/net/eth0/statistics/rx_bytes"]).stdout
    return int(out.strip())


@pytest.fixture
def lab(tmp_path):
    reason = can_make_namespaces()
    if reason:
        pytest.skip(reason)
    with netns_lab(["op", "hosta", "hostb"]) as lab:
        with (
            netns_sshd(lab, "hosta", tmp_path / "sshd-hosta") as sa,
            netns_sshd(lab, "hostb", tmp_path / "sshd-hostb", client_key=sa.key_path) as sb,
        ):
            lab.extra["sshds"] = {"hosta": sa, "hostb": sb}
            yield lab


def test_deploy_verify_restart_pair_across_three_namespaces(lab, tmp_path):
    op = lab.names["op"]
    sshds = lab.extra["sshds"]
    direct = write_inventory(tmp_path / "inv-direct.yaml", _inventory(lab, sshds, tmp_path, http="direct"))
    tunnel = write_inventory(tmp_path / "inv-tunnel.yaml", _inventory(lab, sshds, tmp_path, http="tunnel"))
    state = tmp_path / "operator-state"
    state.mkdir()
    run = dict(state=state, netns=op, timeout=90)  # every pdctl call is bounded; the lab is removed anyway
    try:
        dep = pdctl(["deploy", "-i", str(direct), "--json"], **run)
        _assert_all_layers_pass(dep, "deploy")

        # each role runs on its own host: pidfiles in that host's state_dir only
        assert {p.name.rsplit("-", 2)[-2] for p in (tmp_path / "hosta-state").glob("*.pid")} == {"prefill"}
        assert {p.name.rsplit("-", 2)[-2] for p in (tmp_path / "hostb-state").glob("*.pid")} == {"decode", "router"}
        pids_a = set(
            subprocess.run(
                ["ip", "netns", "pids", lab.names["hosta"]], capture_output=True, text=True, timeout=15
            ).stdout.split()
        )
        prefill_pid = _pid(tmp_path / "hosta-state" / "pdctl-multihost-prefill-0.pid")
        assert prefill_pid in pids_a, "the prefill does not run inside hosta's namespace"

        # the KV path crosses the veth: UCX chose its TCP transport on eth0 for an inter-node peer (never CMA or
        # shared memory), the prefill process holds a UCX connection to hostb besides HTTP, and hostb's eth0 receives
        a, b = lab.addresses["hosta"], lab.addresses["hostb"]
        rx0 = _rx_bytes(lab, "hostb")
        fh = pdctl(["verify", "final-health", "-i", str(direct), "--json"], **run)
        _assert_all_layers_pass(fh, "final-health (http direct)")
        assert _rx_bytes(lab, "hostb") > rx0
        ucx = (tmp_path / "hosta-state" / "pdctl-multihost-prefill-0.log").read_text()
        assert "inter-node" in ucx and "tcp/eth0" in ucx, ucx[-3000:]
        assert "intra-node" not in ucx and "cma/" not in ucx, ucx[-3000:]
        conns = _tcp_between(lab, "hosta", a, b)
        prefill_pids = server_pids(prefill_pid)  # the UCX connection is the scheduler process's
        ucx_conns = [
            c
            for c in conns
            if any(f"pid={p}," in c for p in prefill_pids)
            and c.split()[2].rsplit(":", 1)[1] not in (str(PORTS["prefill"]), str(PORTS["bootstrap"]))
        ]
        assert ucx_conns, f"the prefill holds no UCX connection to hostb: {conns}"

        # the same deployment seen through SSH tunnels (roles' ports reached via each host's sshd)
        fh_t = pdctl(["verify", "final-health", "-i", str(tunnel), "--json"], **run)
        _assert_all_layers_pass(fh_t, "final-health (http tunnel)")

        pair = pdctl(["restart", "--pair", "-i", str(direct), "--json"], **run)
        _assert_all_layers_pass(pair, "restart --pair")
        new_prefill_pid = _pid(tmp_path / "hosta-state" / "pdctl-multihost-prefill-0.pid")
        assert new_prefill_pid != prefill_pid
        assert (tmp_path / "hosta-state" / "lineage" / "multihost.json").exists()

        again = pdctl(["verify", "final-health", "-i", str(direct), "--json"], **run)
        _assert_all_layers_pass(again, "final-health after restart --pair")
    finally:
        down = pdctl(["down", "-i", str(direct)], state=state, netns=op, timeout=60)
    assert down.code == 0, down.output
    for host in ("hosta", "hostb"):
        left = lab.run(host, ["ss", "-Hltn"]).stdout
        for port in (PORTS["prefill"], PORTS["decode"], PORTS["router"], PORTS["bootstrap"]):
            assert f":{port} " not in left, f"{host} still listens on {port} after down:\n{left}"
