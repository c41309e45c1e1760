"""What an inventory's hosts and ports may be, refused at load (exit 2) under the field that is wrong: a host's
`address`/`internal_address` must be a host name or an IP, `proxy_jump` a chain of `[user@]host[:port]` hops, an
explicit `ssh_config` must exist (checked where the host's key is, before any connect), and a port clash is named
under the field that makes it (a default bootstrap_port included) with the other user's field."""

from __future__ import annotations

import pytest

from pdctl.errors import InventoryError, UsageError
from pdctl.inventory import parse_inventory
from pdctl.transport.ssh import parse_jump, resolve_target
from tests.e2e.helpers import pdctl, write_inventory
from tests.fixtures.net import closed_port


def _data(host=None, prefills=None):
    return {
        "name": "hp",
        "hosts": {
            "g": {"transport": "ssh", "address": "127.0.0.1", "http": "tunnel", "connect_timeout": 3, **(host or {})}
        },
        "roles": {
            "prefill": prefills or [{"host": "g", "port": 41000, "bootstrap_port": 41001}],
            "decode": [{"host": "g", "port": 41002}],
            "router": [{"host": "g", "port": 41003}],
        },
    }


def _refused(data) -> str:
    with pytest.raises(InventoryError) as e:
        parse_inventory(data, "inv.yaml")
    assert e.value.exit_code == 2
    return e.value.message


def test_an_empty_address_is_refused_by_the_cli_before_any_connect(tmp_path):
    inv = write_inventory(tmp_path / "inv.yaml", _data({"address": "", "port": closed_port()}))
    r = pdctl(["status", "-i", str(inv)], state=tmp_path / "state")
    assert r.code == 2, r.output
    assert "hosts.g.address: empty" in r.stderr and "Traceback" not in r.output and "gaierror" not in r.output
    j = pdctl(["status", "-i", str(inv), "--json"], state=tmp_path / "state")
    assert j.code == 2 and "hosts.g.address" in j.json()["error"]["message"]


@pytest.mark.parametrize(
    "address, why",
    [
        ("a b", "not a host name"),
        ("h;rm -rf /", "not a host name"),
        ("gpu1:22", "holds a port"),
        ("-oProxyCommand=x", "not a host name"),
        ("999.1.1.1", "not a host name"),
        ("[::1]", "without brackets"),
    ],
)
def test_an_address_that_is_no_host_name_or_ip_is_refused(address, why):
    msg = _refused(_data({"address": address, "internal_address": address}))
    assert f"hosts.g.address: {address!r}" in msg and f"hosts.g.internal_address: {address!r}" in msg and why in msg


@pytest.mark.parametrize("address", ["gpu1.example.internal", "gpu_1", "10.0.0.1", "::1", "fe80::1%eth0", "h."])
def test_host_names_and_ips_load(address):
    parse_inventory(_data({"address": address}), "inv.yaml")


@pytest.mark.parametrize(
    "listen_host, why", [("", "empty"), ("0.0.0.0:30000", "holds a port"), ("a b", "not a host name")]
)
def test_a_listen_host_that_is_no_address_is_refused(listen_host, why):
    prefills = [{"host": "g", "port": 41000, "bootstrap_port": 41001, "listen_host": listen_host}]
    msg = _refused(_data(prefills=prefills))
    assert "roles.prefill.0.listen_host: " in msg and why in msg


@pytest.mark.parametrize(
    "jump, why",
    [
        ("user@:99999", "hop 'user@:99999': no host"),
        (",,,", "an empty hop"),
        ("@", "no user before '@'"),
        ("u@h:0", "port '0' is not 1-65535"),
        ("a,b c", "hop 'b c'"),
        ("h:x", "port 'x'"),
    ],
)
def test_a_proxy_jump_that_cannot_be_dialled_is_refused(jump, why):
    assert "hosts.g.proxy_jump: " in (msg := _refused(_data({"proxy_jump": jump}))) and why in msg


def test_good_jump_chains_load_and_parse_as_before():
    parse_inventory(_data({"proxy_jump": "ua@a:1,[::1]:2,b"}), "inv.yaml")
    assert parse_jump("ua@a:1,ub@b:2") == ("ub", "b", 2, "ua@a:1")
    assert parse_jump("[::1]:2") == (None, "::1", 2, None)


def test_a_missing_ssh_config_is_a_usage_error_naming_host_and_file(tmp_path):
    inv = parse_inventory(_data({"ssh_config": str(tmp_path / "nope" / "cfg")}), "inv.yaml")
    with pytest.raises(UsageError) as e:
        resolve_target(inv.hosts["g"], "g")
    assert e.value.exit_code == 2 and f"host 'g': ssh_config file {tmp_path}/nope/cfg does not exist" in e.value.message
    path = write_inventory(
        tmp_path / "inv.yaml", _data({"ssh_config": str(tmp_path / "nope" / "cfg"), "port": closed_port()})
    )
    r = pdctl(["status", "-i", str(path), "--json"], state=tmp_path / "state")
    assert r.code == 2, r.output
    assert "ssh_config file" in r.json()["roles"][0]["error"] and "does not exist" in r.stderr


def test_a_bad_proxyjump_in_ssh_config_is_a_usage_error_naming_the_file(tmp_path):
    cfg = tmp_path / "cfg"
    cfg.write_text("Host *\n  ProxyJump user@:99999\n")
    inv = parse_inventory(_data({"ssh_config": str(cfg)}), "inv.yaml")
    with pytest.raises(UsageError) as e:
        resolve_target(inv.hosts["g"], "g")
    assert f"ssh_config {cfg}: ProxyJump hop 'user@:99999': no host" in e.value.message


def test_a_default_bootstrap_port_clash_is_named_under_bootstrap_port(tmp_path):
    prefills = [{"host": "g", "port": 41000}, {"host": "g", "port": 41005}]
    msg = _refused(_data(prefills=prefills))
    assert (
        "roles.prefill.1.bootstrap_port: port 8998 (default) on host 'g' is also used by prefill[0]'s "
        "bootstrap_port (default); set a bootstrap_port per prefill" in msg
    )
    assert "roles.prefill.1.port" not in msg


def test_a_bootstrap_port_equal_to_its_own_port_is_named_so():
    msg = _refused(_data(prefills=[{"host": "g", "port": 41000, "bootstrap_port": 41000}]))
    assert "roles.prefill.0.bootstrap_port: port 41000 on host 'g' is also used by prefill[0]'s port" in msg


def test_every_port_clash_is_listed_with_the_other_users_field():
    data = _data(prefills=[{"host": "g", "port": 41000, "bootstrap_port": 41002}])
    data["roles"]["router"][0]["port"] = 41000
    msg = _refused(data)
    assert "roles.decode.0.port: port 41002 on host 'g' is also used by prefill[0]'s bootstrap_port" in msg
    assert "roles.router.0.port: port 41000 on host 'g' is also used by prefill[0]'s port" in msg


def test_ssh_config_none_reads_no_file(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host *\n  User from-default-config\n")
    monkeypatch.setenv("HOME", str(home))
    inv = parse_inventory(_data({"ssh_config": "none"}), "inv.yaml")
    assert resolve_target(inv.hosts["g"], "g").user != "from-default-config"
    assert resolve_target(parse_inventory(_data(), "inv.yaml").hosts["g"], "g").user == "from-default-config"


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 0, -1])
def test_a_timeout_must_be_finite_and_positive(value):
    """`.inf` would wait for ever (a hung start never reported); nan compares false with every limit."""
    prefills = [{"host": "g", "port": 41000, "bootstrap_port": 41001, "ready_timeout": value}]
    assert "roles.prefill.0.ready_timeout: " in _refused(_data(prefills=prefills))
    assert "hosts.g.connect_timeout: " in _refused(_data({"connect_timeout": value}))
