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
        "hosts": {
            "a": {"transport": "ssh", "address": "10.0.0.1", "http": http},
            "b": {"transport": "ssh", "address": "10.0.0.2", "http": "tunnel"},
        },
        "roles": {
            "prefill": [{"host": "a", "port": 30000, "listen_host": prefill_listen}],
            "decode": [{"host": "b", "port": 30002}],
            "router": [{"host": "b", "port": 30001}],
        },
    }


def test_loopback_role_dialled_from_another_host_is_refused():
    with pytest.raises(InventoryError) as e:
        parse_inventory(_two_hosts(), "multi.yaml")
    assert "roles.prefill.0.listen_host" in e.value.message and "'b'" in e.value.message
    parse_inventory(_two_hosts(prefill_listen="0.0.0.0"), "multi.yaml")  # reachable: accepted


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
    assert parse_inventory(yaml.safe_load(block), "docs").dump() == embedded_default().dump()


def test_loopback_router_probed_directly_over_ssh_is_refused():
    data = _two_hosts(prefill_listen="0.0.0.0")
    data["roles"]["decode"][0]["listen_host"] = "0.0.0.0"
    data["hosts"]["b"]["http"] = "direct"
    with pytest.raises(InventoryError) as e:
        parse_inventory(data, "multi.yaml")
    assert "roles.router.0.listen_host" in e.value.message


def _with_env(role: str, env: dict, where: str = "env") -> dict:
    data = {"roles": {"prefill": [{"port": 30000}], "decode": [{"port": 30002}], "router": [{"port": 30001}]}}
    if where == "env":
        data["roles"][role][0]["env"] = env
    else:
        data["final_health"] = {"expect": {role: {"env": env}}}
    return data


@pytest.mark.parametrize("name", ["A;touch /tmp/pwned", "$(id)", "1ST", "A B", "A-B", "", "A=B"])
def test_env_name_that_is_not_a_shell_identifier_is_refused_naming_the_field(name):
    with pytest.raises(InventoryError) as e:
        parse_inventory(_with_env("decode", {name: "1"}), "bad.yaml")
    assert e.value.exit_code == 2
    assert "bad.yaml" in e.value.message and "roles.decode.0.env" in e.value.message
    assert repr(name) in e.value.message and "shell identifier" in e.value.message


@pytest.mark.parametrize(
    "value, kind",
    [([1, 2], "list"), ({"a": 1}, "dict"), (b"\x00", "bytes"), (__import__("datetime").date(2024, 1, 2), "date")],
)
def test_env_value_that_is_not_a_scalar_is_refused_naming_the_variable(value, kind):
    with pytest.raises(InventoryError) as e:
        parse_inventory(_with_env("prefill", {"SGLANG_X": value}), "bad.yaml")
    msg = e.value.message
    assert "roles.prefill.0.env" in msg and "SGLANG_X" in msg and kind in msg
    with pytest.raises(InventoryError) as e:  # what final-health expects is checked the same way
        parse_inventory(_with_env("decode", {"SGLANG_X": value}, where="expect"), "bad.yaml")
    assert "final_health.expect.decode.env" in e.value.message


def test_env_value_with_a_nul_is_refused():
    with pytest.raises(InventoryError) as e:
        parse_inventory(_with_env("router", {"X": "a\0b"}), "bad.yaml")
    assert "roles.router.0.env" in e.value.message and "NUL" in e.value.message


def test_launch_flag_value_with_a_nul_is_refused():
    data = _with_env("decode", {})
    data["roles"]["decode"][0]["args"] = {"--x": ["ok", "a\0b"]}
    with pytest.raises(InventoryError) as e:
        parse_inventory(data, "bad.yaml")
    assert "roles.decode.0.args" in e.value.message and "NUL" in e.value.message


def test_scalar_env_values_become_text_with_booleans_as_sglang_spells_them():
    env = {"_A1": 0, "B": 1.5, "C": True, "D": False, "E": "x y", "F": "", "G": 1e-5, "H": "null", "I": "True"}
    inv = parse_inventory(_with_env("decode", env), "ok.yaml")
    assert inv.roles.decode[0].env == {
        "_A1": "0",
        "B": "1.5",
        "C": "true",
        "D": "false",
        "E": "x y",
        "F": "",
        "G": "1e-05",
        "H": "null",
        "I": "True",
    }  # text stays as written


def test_a_null_env_value_is_refused_naming_the_variable(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from pdctl.cli.app import app

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    with pytest.raises(InventoryError) as e:
        parse_inventory(_with_env("decode", {"OK": "1", "X": None}), "bad.yaml")
    assert "roles.decode.0.env" in e.value.message and "env X: null is not a value" in e.value.message
    assert 'write an empty string ""' in e.value.message
    p = tmp_path / "inv.yaml"
    p.write_text(
        "roles:\n  prefill: [{port: 30000}]\n  decode: [{port: 30002, env: {X: }}]\n  router: [{port: 30001}]\n"
    )
    r = CliRunner().invoke(app, ["deploy", "--dry-run", "-i", str(p)])
    assert r.exit_code == 2 and str(p) in r.output and "env X: null" in r.output, r.output


def test_env_list_written_in_yaml_is_refused_at_load(tmp_path):
    p = tmp_path / "inv.yaml"
    p.write_text(
        "roles:\n  prefill: [{port: 30000, env: {CUDA_VISIBLE_DEVICES: [1, 2]}}]\n"
        "  decode: [{port: 30002}]\n  router: [{port: 30001}]\n"
    )
    with pytest.raises(InventoryError) as e:
        load_inventory(p)
    assert str(p) in e.value.message and "CUDA_VISIBLE_DEVICES" in e.value.message and "[1, 2]" in e.value.message


@pytest.mark.parametrize(
    "value, needle", [(-1, ">= 0.0 (got -1)"), (86401, "<= 86400.0 (got 86401)"), ("soon", "hosts.gpu.keep_connection")]
)
def test_keep_connection_is_bounded_seconds(value, needle):
    data = {
        "hosts": {"gpu": {"transport": "ssh", "keep_connection": value}},
        "roles": {
            r: [{"host": "gpu", "port": p, "listen_host": "0.0.0.0"}]
            for r, p in (("prefill", 30000), ("decode", 30002), ("router", 30001))
        },
    }
    with pytest.raises(InventoryError) as e:
        parse_inventory(data, "keep.yaml")
    assert "hosts.gpu.keep_connection" in e.value.message and needle in e.value.message
    data["hosts"]["gpu"]["keep_connection"] = 600
    assert parse_inventory(data, "keep.yaml").hosts["gpu"].keep_connection == 600.0


def test_keep_env_wins_over_the_inventory_and_is_checked(monkeypatch):
    from pdctl.errors import UsageError
    from pdctl.inventory import Host
    from pdctl.transport.control import keep_seconds

    host = Host(transport="ssh", keep_connection=600)
    monkeypatch.delenv("PDCTL_SSH_KEEP", raising=False)
    assert keep_seconds(host) == 600
    monkeypatch.setenv("PDCTL_SSH_KEEP", "0")
    assert keep_seconds(host) == 0
    monkeypatch.setenv("PDCTL_SSH_KEEP", "30")
    assert keep_seconds(Host(transport="ssh")) == 30
    for bad in ("ten", "-5", "nan", "90000"):
        monkeypatch.setenv("PDCTL_SSH_KEEP", bad)
        with pytest.raises(UsageError) as e:
            keep_seconds(host)
        assert e.value.exit_code == 2 and "PDCTL_SSH_KEEP" in e.value.message and repr(bad) in e.value.message


def test_a_restart_policy_other_than_the_default_needs_systemd_and_a_dump_reads_back():
    data = embedded_default().dump()
    assert parse_inventory(data, "dumped.yaml").hosts["local"].systemd_restart == "on-failure"  # round trip
    data["hosts"]["local"]["systemd_restart"] = "always"
    with pytest.raises(InventoryError, match="systemd_restart: only service_manager: systemd"):
        parse_inventory(data, "pidfile-always.yaml")


def test_a_secret_env_value_of_the_wrong_type_is_not_echoed():
    data = {
        "roles": {
            "prefill": [{"port": 1, "env": {"API_TOKEN": ["hunter2secret"]}}],
            "decode": [{"port": 2}],
            "router": [{"port": 3}],
        }
    }
    with pytest.raises(InventoryError) as e:
        parse_inventory(data, "x.yaml")
    assert "roles.prefill.0.env: env API_TOKEN" in e.value.message and "got list" in e.value.message
    assert "hunter2secret" not in e.value.message


@pytest.mark.parametrize("keep", [0.001, 1, 4.99])
def test_a_keep_too_short_to_last_one_run_is_refused_naming_the_field(keep):
    """Issue 28 W10's inventory twin: a keeper kept under 5 s ends between the requests of one run."""
    from pdctl.inventory import Host

    with pytest.raises(ValueError) as e:
        Host(transport="ssh", keep_connection=keep)
    assert "keep_connection" in str(e.value) and "5 to 86400" in str(e.value)
    assert Host(transport="ssh", keep_connection=5).keep_connection == 5
