"""The bundled engine's UCX (under NIXL) stays on loopback when every worker is on one host; a multi-host
deployment names its device in the inventory env."""

from pdctl import launch
from pdctl.inventory import embedded_default, parse_inventory


def test_embedded_default_confines_ucx_to_loopback():
    inv = embedded_default()
    assert launch.role_env(inv, "prefill", 0)["UCX_NET_DEVICES"] == "lo"
    assert launch.role_env(inv, "decode", 0)["UCX_NET_DEVICES"] == "lo"
    assert "UCX_NET_DEVICES" not in launch.role_env(inv, "router", 0)
    assert launch.service_spec(inv, "decode", 0).env["UCX_NET_DEVICES"] == "lo"


def _two_hosts(decode_env=None):
    return parse_inventory(
        {
            "hosts": {
                "a": {"transport": "ssh", "address": "10.0.0.1"},
                "b": {"transport": "ssh", "address": "10.0.0.2", "http": "tunnel"},
            },
            "roles": {
                "prefill": [{"host": "a", "port": 30000, "listen_host": "0.0.0.0"}],
                "decode": [{"host": "b", "port": 30002, "listen_host": "0.0.0.0", "env": decode_env or {}}],
                "router": [{"host": "b", "port": 30001}],
            },
        },
        "multi.yaml",
    )


def test_multi_host_leaves_the_device_to_the_inventory():
    inv = _two_hosts({"UCX_NET_DEVICES": "eth1"})
    assert "UCX_NET_DEVICES" not in launch.role_env(inv, "prefill", 0)
    assert launch.role_env(inv, "decode", 0)["UCX_NET_DEVICES"] == "eth1"


def test_declared_device_wins_on_one_host():
    data = embedded_default().dump()
    data["roles"]["decode"][0]["env"] = {"UCX_NET_DEVICES": "eth0"}
    inv = parse_inventory(data, "one.yaml")
    assert launch.role_env(inv, "decode", 0)["UCX_NET_DEVICES"] == "eth0"
    assert launch.role_env(inv, "prefill", 0)["UCX_NET_DEVICES"] == "lo"
