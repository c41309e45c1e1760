"""xPyD across hosts: two prefills on `hosta`, two decodes on `hostb`, the router on `hostc`, pdctl and a client
in `op`; every host a network namespace with its own sshd (tests/fixtures/netns.py), the KV crossing the veths over
NIXL/UCX on TCP.

The story of issue 14: the engine's degraded-bootstrap drill is armed on prefill[0]; decode[1] alone is restarted
under it (as systemd's Restart= would after a crash), which breaks exactly prefill[0] -> decode[1]. The router's own
probe stays green (it retries on another pair); `verify pairs` names exactly that pair; `restart --rolling` heals
it while a checked client load of 2 requests/s runs through the router, with no failed client request (the
broken pair's decode goes out first); the same
load during `restart --pair` sees the outage that the rolling restart avoids. The figures are printed
(`-s` shows them) and are in docs/performance.md.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.e2e.helpers import REPO, pdctl, write_inventory
from tests.e2e.test_multihost_netns import UCX_ENV, _host
from tests.fixtures.netns import can_make_namespaces, netns_lab, netns_sshd

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

DECODE_WAIT_S = "3"  # a decode gives up on a room whose KV never comes after 3 s (the router then retries)


def _inventory(sshds, tmp) -> dict:
    worker = {"listen_host": "0.0.0.0", "ready_timeout": 90}
    return {
        "name": "xpyd",
        "engine": "bundled",
        "hosts": {h: _host(sshds[h], tmp / f"{h}-state", http="direct") for h in ("hosta", "hostb", "hostc")},
        "roles": {
            "prefill": [
                {
                    **worker,
                    "host": "hosta",
                    "port": 30000,
                    "bootstrap_port": 8998,
                    "env": {**UCX_ENV, "PDCTL_DRILLS": "degraded-bootstrap"},
                },
                {**worker, "host": "hosta", "port": 30010, "bootstrap_port": 8999, "env": UCX_ENV},
            ],
            "decode": [
                {
                    **worker,
                    "host": "hostb",
                    "port": 30002 + 10 * j,
                    "env": {**UCX_ENV, "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": DECODE_WAIT_S},
                }
                for j in range(2)
            ],
            "router": [
                {
                    **worker,
                    "host": "hostc",
                    "port": 30001,
                    "args": {"--health-check-interval-secs": 2, "--policy": "random"},
                }
            ],
        },
        "final_health": {"probe": {"timeout": 30}},
    }


@pytest.fixture
def lab(tmp_path):
    reason = can_make_namespaces()
    if reason:
        pytest.skip(reason)
    with netns_lab(["op", "hosta", "hostb", "hostc"]) as lab:
        with (
            netns_sshd(lab, "hosta", tmp_path / "sshd-hosta") as sa,
            netns_sshd(lab, "hostb", tmp_path / "sshd-hostb", client_key=sa.key_path) as sb,
            netns_sshd(lab, "hostc", tmp_path / "sshd-hostc", client_key=sa.key_path) as sc,
        ):
            lab.extra["sshds"] = {"hosta": sa, "hostb": sb, "hostc": sc}
            yield lab


class LoadInNamespace:
    """tests/fixtures/client_load.py as a process in the operator's namespace: its summary when stopped."""

    def __init__(self, lab, url: str):
        self.cmd = [*lab.exec_prefix("op"), sys.executable, "-m", "tests.fixtures.client_load", url, "2"]
        self.summary: dict | None = None

    def __enter__(self) -> "LoadInNamespace":
        self.proc = subprocess.Popen(self.cmd, cwd=REPO, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "started"
        return self

    def __exit__(self, *exc) -> None:
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=60)
        self.summary = json.loads(out.strip().splitlines()[-1])


def _restart_one_alone(lab, inv_path, state, role: str, index: int) -> None:
    """Restart one instance behind pdctl's back, with pdctl's own library from the operator's namespace (what
    systemd's Restart= does to a crashed decode): the lineage hazard the drill turns into a broken pair."""
    code = textwrap.dedent(f"""
        from pdctl.inventory import load_inventory
        from pdctl.ops.context import Deployment
        from pdctl.ops.readiness import wait_ready
        inv = load_inventory({str(inv_path)!r})
        with Deployment(inv) as dep:
            inst = dep.instance({role!r}, {index})
            dep.services(inst.host).restart(inv.service_name({role!r}, {index}), grace=20)
            wait_ready(dep, {role!r}, {index})
    """)
    p = subprocess.run(
        [*lab.exec_prefix("op"), sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"XDG_STATE_HOME": str(state), "PATH": "/usr/bin:/bin"},
    )
    assert p.returncode == 0, p.stdout + p.stderr


def test_one_broken_pair_named_and_healed_by_a_rolling_restart_under_load(lab, tmp_path):
    op = lab.names["op"]
    inv = write_inventory(tmp_path / "inv.yaml", _inventory(lab.extra["sshds"], tmp_path))
    state = tmp_path / "operator-state"
    state.mkdir()
    run = dict(state=state, netns=op, timeout=300)
    router = f"http://{lab.addresses['hostc']}:30001"
    try:
        dep = pdctl(["deploy", "-i", str(inv), "--json"], **run)
        assert dep.code == 0, dep.output
        first = pdctl(["verify", "pairs", "-i", str(inv), "--json"], **run)
        assert first.code == 0, first.output

        _restart_one_alone(lab, inv, state, "decode", 1)
        probe = pdctl(["verify", "final-health", "-i", str(inv), "--layer", "e2e", "--json"], **run)
        assert probe.code == 0, f"the router's own probe should still pass: {probe.output}"
        broken = pdctl(["verify", "pairs", "-i", str(inv), "--json"], **run)
        assert broken.code == 1, broken.output
        failed = [p["name"] for p in broken.json()["pairs"] if p["status"] != "pass"]
        assert failed == ["prefill[0] -> decode[1]"], broken.json()["pairs"]

        with LoadInNamespace(lab, router) as rolling_load:
            rolling = pdctl(["restart", "--rolling", "-i", str(inv), "--json"], **run)
        assert rolling.code == 0, rolling.output
        assert [u["state"] for u in rolling.json()["units"]] == ["done", "done"]
        # the broken pair's decode goes out first: the sound decode[0] serves while prefill[0] is rolled (in index
        # order decode[1] alone served, the router's retries on the broken pair opened its circuit: a 503)
        assert [u["decodes"] for u in rolling.json()["units"]] == [["decode[1]"], ["decode[0]"]], rolling.output
        healed = pdctl(["verify", "pairs", "-i", str(inv), "--json"], **run)
        assert healed.code == 0, healed.output

        with LoadInNamespace(lab, router) as pair_load:
            pair = pdctl(["restart", "--pair", "-i", str(inv), "--json"], **run)
        # the decodes wait stopped while the prefills restart, so no restarted prefill meets an old decode: under
        # load the co-restart leaves no broken pair (when it restarted each in place, prefill[0]'s pairs broke)
        # (its final-health may count a request in flight when its decode stopped: a transfer failure, nothing else)
        assert pair.code in (0, 1), pair.output
        assert {
            c["layer"] for lay in pair.json()["final_health"]["layers"].values() for c in lay if c["status"] == "fail"
        } <= {"transfer"}, pair.output
        after = pdctl(["verify", "pairs", "-i", str(inv), "--json"], **run)
        assert after.code == 0, after.output

        r, p = rolling_load.summary, pair_load.summary
        print(
            f"\n[xpyd figure] restart --rolling: {len(r['failed'])} of {r['sent']} client requests failed; "
            f"restart --pair: {len(p['failed'])} of {p['sent']} failed"
        )
        assert r["sent"] >= 20 and r["failed"] == [], r
        # the same load sees an outage when there is one: the rolling figure is not a blind instrument's
        assert len(p["failed"]) >= 1, p
    finally:
        down = pdctl(["down", "-i", str(inv)], state=state, netns=op, timeout=120)
    assert down.code == 0, down.output
