"""The transports extension point: hosts as a tagged union (one model per `transport`), the kinds registry, and
the callers that ask the host or the registry instead of comparing `transport` to a string."""

from __future__ import annotations

import re
import sys
import typing
from pathlib import Path

import pytest

from pdctl.errors import InventoryError, UsageError
from pdctl.inventory import embedded_default, parse_inventory
from pdctl.inventory_hosts import HOST_TYPES, AnyHost, Host, LocalHost, SshHost
from pdctl.transport.connect import TransportPool, connect
from pdctl.transport.kinds import TransportKind, register, transport_kind, transport_kinds

REPO = Path(__file__).resolve().parents[2]
ROLES = {
    "prefill": [{"host": "gpu", "port": 30000, "listen_host": "0.0.0.0"}],
    "decode": [{"host": "gpu", "port": 30002, "listen_host": "0.0.0.0"}],
    "router": [{"host": "local", "port": 30001}],
}


def _inventory(hosts: dict):
    return parse_inventory({"hosts": hosts, "roles": ROLES}, "inv.yaml")


def test_every_host_model_has_its_kind_and_every_kind_its_model():
    assert set(typing.get_args(AnyHost)) == set(HOST_TYPES.values())
    kinds = transport_kinds()
    assert set(kinds) == set(HOST_TYPES)
    for name, kind in kinds.items():
        assert kind.host_type is HOST_TYPES[name] and kind.host_type.__struct_config__.tag == name
        assert kind.http_routes and set(kind.http_routes) <= {"direct", "tunnel"}


def test_a_kind_whose_name_is_not_its_models_tag_is_refused():
    with pytest.raises(ValueError, match="tagged 'ssh'"):
        register(TransportKind("kubectl", SshHost, lambda name, host: None, ("tunnel",), "x"))
    assert "kubectl" not in transport_kinds()


def test_hosts_parse_as_their_kind_and_keep_a_readable_transport():
    inv = _inventory({"local": {}, "gpu": {"transport": "ssh", "address": "10.0.0.7", "port": "2222"}})
    local, gpu = inv.hosts["local"], inv.hosts["gpu"]
    assert isinstance(local, LocalHost) and isinstance(gpu, SshHost)
    assert (local.transport, gpu.transport, gpu.port) == ("local", "ssh", 2222)
    assert (local.runs_here, gpu.runs_here) == (True, False)
    assert transport_kind(gpu).runs_here is False and transport_kind("local").runs_here is True
    assert isinstance(embedded_default().hosts["local"], LocalHost)


def test_a_dump_keeps_the_transport_and_reads_back():
    inv = _inventory({"local": {}, "gpu": {"transport": "ssh", "address": "10.0.0.7", "http": "tunnel"}})
    dumped = inv.dump(exclude_defaults=True)
    assert dumped["hosts"] == {
        "local": {"transport": "local"},
        "gpu": {"transport": "ssh", "address": "10.0.0.7", "http": "tunnel"},
    }
    again = parse_inventory(dumped, "again.yaml")
    assert again.hosts == inv.hosts and again.hosts["gpu"].http_route == "tunnel"


def test_a_field_of_another_kind_is_refused_naming_it_and_the_kind():
    with pytest.raises(InventoryError) as e:
        _inventory({"local": {}, "gpu": {"address": "10.0.0.7", "user": "ops", "port": 22}})
    assert "inv.yaml" in e.value.message and "hosts.gpu.user: unknown field" in e.value.message
    assert "hosts.gpu.port: unknown field" in e.value.message
    assert (
        e.value.hint == "hosts.gpu: user, port are fields of `transport: ssh` hosts; set `transport: ssh` if it is one"
    )


def test_an_unknown_transport_names_the_field_and_the_kinds():
    with pytest.raises(InventoryError) as e:
        _inventory({"local": {}, "gpu": {"transport": "kube", "address": "10.0.0.7"}})
    assert "hosts.gpu.transport: Invalid value 'kube'" in e.value.message
    assert e.value.hint == "hosts.gpu.transport: choose from local, ssh"


def test_ssh_field_checks_still_name_their_field():
    with pytest.raises(InventoryError) as e:
        _inventory({"local": {}, "gpu": {"transport": "ssh", "address": "10.0.0.7", "proxy_jump": "a b"}})
    assert "hosts.gpu.proxy_jump:" in e.value.message


def test_the_flat_constructor_builds_the_kind_it_names():
    assert isinstance(Host(), LocalHost)
    h = Host(transport="ssh", address="10.0.0.7", keep_connection=5)
    assert isinstance(h, SshHost) and (h.address, h.keep_connection) == ("10.0.0.7", 5)
    with pytest.raises(ValueError, match="choose from local, ssh"):
        Host(transport="kube")
    with pytest.raises(TypeError):
        LocalHost(user="ops")  # an SSH field on a local host


def test_connect_asks_the_registry(monkeypatch):
    from pdctl.transport.kept import KeptTransport
    from pdctl.transport.local import LocalTransport
    from pdctl.transport.ssh import SshTransport

    monkeypatch.delenv("PDCTL_SSH_KEEP", raising=False)
    assert isinstance(connect("local", LocalHost()), LocalTransport)
    ssh = connect("gpu", SshHost(address="10.0.0.7", ssh_config="none"))  # lazy: nothing is dialled
    assert isinstance(ssh, SshTransport) and not ssh.connected and not ssh.http_tunnel
    kept = connect("gpu", SshHost(address="10.0.0.7", ssh_config="none", keep_connection=60, http="tunnel"))
    assert isinstance(kept, KeptTransport) and kept.http_tunnel


def test_a_bad_keep_env_stops_a_pool_with_an_ssh_host_and_not_a_local_one(monkeypatch):
    monkeypatch.setenv("PDCTL_SSH_KEEP", "soon")
    TransportPool({"local": LocalHost()}).close()
    with pytest.raises(UsageError, match="PDCTL_SSH_KEEP"):
        TransportPool({"local": LocalHost(), "gpu": SshHost(address="10.0.0.7")})


def test_connect_all_runs_nothing_on_this_machine(monkeypatch):
    from pdctl.ops.context import Deployment
    from pdctl.transport.local import LocalTransport

    def refuse(*a, **kw):
        raise AssertionError("a command was run to reach this machine")

    monkeypatch.setattr(LocalTransport, "run", refuse)
    with Deployment(embedded_default()) as dep:
        dep.connect_all()


def test_defaults_that_depend_on_where_commands_run():
    from pdctl.launch import metrics_host, python_for
    from pdctl.services.connect import REMOTE_STATE_DIR, default_state_dir

    inv = _inventory(
        {"local": {}, "gpu": {"transport": "ssh", "address": "10.0.0.7", "internal_address": "192.168.0.7"}}
    )
    assert (python_for(inv, "local"), python_for(inv, "gpu")) == (sys.executable, "python3")
    assert default_state_dir(inv.hosts["gpu"]) == REMOTE_STATE_DIR
    assert default_state_dir(inv.hosts["local"]).endswith("pdctl")
    moved = parse_inventory(
        {
            "hosts": inv.dump()["hosts"],
            "roles": {**ROLES, "router": [{"host": "gpu", "port": 30001, "listen_host": "0.0.0.0"}]},
        },
        "inv.yaml",
    )
    assert metrics_host(moved, 0) == "192.168.0.7"
    assert metrics_host(embedded_default(), 0) == "127.0.0.1"


def test_only_ssh_hosts_have_kept_connections():
    from pdctl.ops.ssh_keep import ssh_hosts

    inv = _inventory({"local": {}, "gpu": {"transport": "ssh", "address": "10.0.0.7"}})
    assert ssh_hosts(inv, None) == ["gpu"]
    with pytest.raises(UsageError, match="uses transport local"):
        ssh_hosts(inv, ["local"])
    with pytest.raises(UsageError, match="unknown host 'nope'"):
        ssh_hosts(inv, ["nope"])


def test_docs_list_every_field_of_every_host_kind():
    text = (REPO / "docs" / "inventory.md").read_text()
    for model in HOST_TYPES.values():
        for name in ("transport", *model.__struct_fields__):
            assert re.search(rf"\| `{name}` \|", text), f"docs/inventory.md lacks {model.__name__}.{name}"
