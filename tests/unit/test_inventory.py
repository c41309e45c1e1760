"""Inventory validation: clear errors naming the file and field; the seed's example and the embedded default."""

from pathlib import Path

import pytest

from pdctl.errors import InventoryError
from pdctl.inventory import embedded_default, load_inventory, parse_inventory

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "seed-production.yaml"


def test_embedded_default_uses_the_seed_ports():
    inv = embedded_default()
    ports = {role: inst.port for role, _i, inst in inv.instances()}
    assert ports == {"prefill": 30000, "decode": 30002, "router": 30001}
    assert inv.bootstrap_port(inv.roles.prefill[0]) == 8998
    assert [r for r, _i, _ in inv.instances()] == ["prefill", "decode", "router"]


def test_seed_example_loads_with_its_decode_flags_and_env():
    inv = load_inventory(EXAMPLE)
    dec = inv.roles.decode[0]
    assert dec.args["--disable-overlap-schedule"] is True
    assert dec.args["--cuda-graph-max-bs-decode"] == 96
    assert dec.env == {"SGLANG_OPT_USE_MULTI_STREAM_OVERLAP": "0", "SGLANG_SM120_MMA_TARGET_CTAS": "512"}
    assert inv.hosts["gpu1"].service_manager == "systemd"


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda d: d["roles"]["decode"][0].update(port="high"), "roles.decode.0.port"),
        (lambda d: d["roles"]["router"][0].update(host="nowhere"), "unknown host 'nowhere'"),
        (lambda d: d["roles"].pop("prefill"), "roles.prefill: required field is missing"),
        (lambda d: d["roles"]["decode"][0].update(colour="blue"), "roles.decode.0.colour: unknown field"),
        (lambda d: d["roles"]["decode"][0].update(args={"disable-overlap": True}), "must start with '--'"),
        (lambda d: d["roles"]["decode"][0].update(port=30000), "port 30000 on host 'local' is also used by prefill[0]"),
        (lambda d: d.update(engine="vllm"), "engine"),
        (lambda d: d.update(engine="sglang"), "model_path: required when engine is 'sglang'"),
    ],
)
def test_malformed_inventory_names_file_and_field(mutate, needle):
    data = {
        "hosts": {"local": {}},
        "roles": {"prefill": [{"port": 30000}], "decode": [{"port": 30002}], "router": [{"port": 30001}]},
    }
    mutate(data)
    with pytest.raises(InventoryError) as e:
        parse_inventory(data, "bad.yaml")
    assert e.value.exit_code == 2
    assert "bad.yaml" in e.value.message
    assert needle in e.value.message


def test_bad_yaml_names_line(tmp_path):
    p = tmp_path / "inv.yaml"
    p.write_text("roles:\n  prefill: [\n")
    with pytest.raises(InventoryError) as e:
        load_inventory(p)
    assert str(p) in e.value.message and "line" in e.value.message


def test_missing_file_is_a_usage_error(tmp_path):
    with pytest.raises(InventoryError) as e:
        load_inventory(tmp_path / "nope.yaml")
    assert "nope.yaml" in e.value.message


@pytest.mark.parametrize("field, value", [("name", "../escape"), ("name", "a b"), ("service", "x/../../etc")])
def test_names_that_become_paths_are_restricted(field, value):
    data = {"roles": {"prefill": [{"port": 30000}], "decode": [{"port": 30002}], "router": [{"port": 30001}]}}
    if field == "name":
        data["name"] = value
    else:
        data["roles"]["decode"][0]["service"] = value
    with pytest.raises(InventoryError) as e:
        parse_inventory(data, "inv.yaml")
    assert field in e.value.message


def _two_hosts(prefill_listen="127.0.0.1", http="tunnel"):
    return {
        "hosts": {"a": {"transport": "ssh", "address": "10.0.0.1", "http": http},
                  "b": {"transport": "ssh", "address": "10.0.0.2", "http": "tunnel"}},
        "roles": {"prefill": [{"host": "a", "port": 30000, "listen_host": prefill_listen}],
                  "decode": [{"host": "b", "port": 30002}],
                  "router": [{"host": "b", "port": 30001}]},
    }


def test_loopback_role_dialled_from_another_host_is_refused():
    with pytest.raises(InventoryError) as e:
        parse_inventory(_two_hosts(), "multi.yaml")
    assert "roles.prefill.0.listen_host" in e.value.message and "'b'" in e.value.message
    parse_inventory(_two_hosts(prefill_listen="0.0.0.0"), "multi.yaml")   # reachable: accepted


def test_loopback_role_probed_directly_over_ssh_is_refused():
    data = _two_hosts(prefill_listen="0.0.0.0")
    data["hosts"]["b"]["http"] = "direct"
    with pytest.raises(InventoryError) as e:
        parse_inventory(data, "multi.yaml")
    assert "roles.decode.0.listen_host" in e.value.message and "tunnel" in e.value.message


def test_docs_embedded_default_block_matches_the_code():
    import re

    import yaml

    doc = (Path(__file__).resolve().parents[2] / "docs" / "inventory.md").read_text()
    block = re.search(r"## The embedded default\s+```yaml\n(.*?)```", doc, re.S).group(1)
    assert parse_inventory(yaml.safe_load(block), "docs").model_dump() == embedded_default().model_dump()


def test_loopback_router_probed_directly_over_ssh_is_refused():
    data = _two_hosts(prefill_listen="0.0.0.0")
    data["roles"]["decode"][0]["listen_host"] = "0.0.0.0"
    data["hosts"]["b"]["http"] = "direct"
    with pytest.raises(InventoryError) as e:
        parse_inventory(data, "multi.yaml")
    assert "roles.router.0.listen_host" in e.value.message
