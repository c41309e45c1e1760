"""pdctl over SSH to a real sshd on 127.0.0.1: deploy -> verify -> restart --pair -> verify, with HTTP through the
SSH connection (http: tunnel); host keys refused when unknown; an unreachable host gives exit 3 naming it."""

from __future__ import annotations

import sys

import pytest

from tests.e2e.helpers import layer, local_inventory, pdctl, statuses, write_inventory
from tests.fixtures.net import closed_port, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.engine]


def _ssh_host(sshd, tmp, **over):
    host = {
        "transport": "ssh",
        "address": sshd.address,
        "port": sshd.port,
        "user": sshd.user,
        "key": str(sshd.key_path),
        "known_hosts": str(sshd.known_hosts),
        "connect_timeout": 5,
        "ssh_config": "none",
        "http": "tunnel",
        "service_manager": "pidfile",
        "python": sys.executable,
        "state_dir": str(tmp / "remote-state"),
    }
    host.update(over)
    return host


@pytest.fixture(scope="module")
def ssh_deployment(sshd, tmp_path_factory):
    state = tmp_path_factory.mktemp("ssh-state")
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory(
        "ssh-e2e", ports, host=_ssh_host(sshd, state), decode_args={"--disable-overlap-schedule": True}
    )
    path = write_inventory(state / "inv.yaml", inv)
    try:
        r = pdctl(["deploy", "-i", str(path), "--json"], state=state)
        assert r.code == 0, r.output
        yield {"state": state, "inv": path, "deploy": r}
    finally:
        pdctl(["down", "-i", str(path)], state=state, timeout=120)


def test_deploy_verify_restart_verify_over_ssh(ssh_deployment):
    st, inv = ssh_deployment["state"], str(ssh_deployment["inv"])
    fh = ssh_deployment["deploy"].json()["final_health"]
    assert fh["ok"], fh
    # the pidfile manager ran on the "remote" host: its state is in the host's state_dir, not the operator's
    assert list((st / "remote-state").glob("*.pid"))
    pair = pdctl(["restart", "--pair", "-i", inv, "--json"], state=st)
    assert pair.code == 0, pair.output
    again = pdctl(["verify", "final-health", "-i", inv, "--json"], state=st)
    assert again.code == 0, again.output
    assert statuses(again.json(), "e2e") == {"pass"}
    # the co-restart record lives on the prefill host: another operator (no local state) sees the same lineage
    assert (st / "remote-state" / "lineage" / "ssh-e2e.json").exists()
    other_operator = st / "other-operator"
    other_operator.mkdir()
    seen = pdctl(["verify", "final-health", "-i", inv, "--json", "--layer", "lineage"], state=other_operator)
    assert seen.code == 0, seen.output
    assert all(
        "unchanged since the last co-restart" in r["observed"] or r["target"].startswith("prefill")
        for r in layer(seen.json(), "lineage")
    )
    assert any(
        r["name"] == "--disable-overlap-schedule" and r["status"] == "pass" for r in layer(again.json(), "flags")
    )
    # the version each worker process runs, as it reports it (issue 13)
    versions = {
        r["target"].split("@")[0]: r["observed"] for r in layer(again.json(), "flags") if r["name"] == "version"
    }
    bundled = "pdctl-bundled-cpu 0.5.23+pdctl.cpu"
    assert versions == {"prefill[0]": bundled, "decode[0]": bundled}


def test_unknown_host_key_is_refused_with_exit_4(sshd, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = write_inventory(
        tmp_path / "inv.yaml", local_inventory("hk", ports, host=_ssh_host(sshd, tmp_path, known_hosts=str(empty)))
    )
    r = pdctl(["status", "-i", str(inv)], state=tmp_path)
    assert r.code == 4, r.output
    assert "local" in r.stderr and "accept_new_host_key" in r.output
    assert empty.read_text() == ""  # nothing was trusted behind the operator's back


def test_unreachable_host_exits_3_naming_it(tmp_path):
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    host = {
        "transport": "ssh",
        "address": "127.0.0.1",
        "port": closed_port(),
        "user": "root",
        "connect_timeout": 3,
        "known_hosts": str(tmp_path / "kh"),
        "ssh_config": "none",
        "http": "tunnel",
    }
    data = local_inventory("gone", ports, host=host)
    data["hosts"] = {"gpu-gone": host}
    for role in ("prefill", "decode", "router"):
        data["roles"][role][0]["host"] = "gpu-gone"
    inv = write_inventory(tmp_path / "inv.yaml", data)
    for args in (["deploy", "--dry-run"], ["verify", "final-health"]):
        r = pdctl([*args, "-i", str(inv)], state=tmp_path, timeout=120)
        assert r.code == 3, (args, r.output)
        assert "gpu-gone" in r.stderr
        assert "Traceback" not in r.output
