"""Launch command rendering for both engines uses SGLang's flag names."""

import copy
from pathlib import Path

from pdctl import launch
from pdctl.inventory import parse_inventory, embedded_default, load_inventory

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "seed-production.yaml"


def test_flag_tokens():
    assert launch.flag_tokens({"--a": True, "--b": 96, "--c": [1, 2], "--d": False}) == [
        "--a",
        "--b",
        "96",
        "--c",
        "1",
        "2",
    ]


def test_bundled_default_commands():
    inv = embedded_default()
    pre = launch.role_argv(inv, "prefill", 0)
    assert pre[1:3] == ["-m", "engine.launch_server"]
    joined = " ".join(pre)
    for part in (
        "--disaggregation-mode prefill",
        "--port 30000",
        "--disaggregation-bootstrap-port 8998",
        "--disaggregation-transfer-backend nixl",
        "--enable-metrics",
    ):
        assert part in joined
    router = " ".join(launch.role_argv(inv, "router", 0))
    # smg, the maintained gateway, unless the router entry names another kind
    assert (
        "-m smg.launch_router --pd-disaggregation --prefill http://127.0.0.1:30000 8998 "
        "--decode http://127.0.0.1:30002" in router
    )
    assert "--port 30001" in router and "--prometheus-host 127.0.0.1" in router


def test_router_kind_decides_the_module_and_a_wildcard_router_keeps_metrics_off_every_interface():
    data = embedded_default().dump()
    data["roles"]["router"][0].update(kind="sglang-router", listen_host="0.0.0.0")
    inv = parse_inventory(data, "t.yaml")
    argv = launch.role_argv(inv, "router", 0)
    assert argv[1:3] == ["-m", "sglang_router.launch_router"]
    assert argv[argv.index("--prometheus-host") + 1] == "127.0.0.1"  # a local host's loopback, not 0.0.0.0
    assert launch.recorded_python(launch.service_spec(inv, "router", 0)) == argv[0]


def test_sglang_commands_carry_declared_flags_and_env():
    inv = load_inventory(EXAMPLE)
    dec = launch.role_argv(inv, "decode", 0)
    assert dec[1:3] == ["-m", "sglang.launch_server"]
    assert "--disable-overlap-schedule" in dec
    assert dec[dec.index("--cuda-graph-max-bs-decode") + 1] == "96"
    assert launch.role_env(inv, "decode", 0)["SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"] == "0"
    assert launch.declared_flags(inv, "decode", 0)["--disable-overlap-schedule"] is True
    spec = launch.service_spec(inv, "decode", 0)
    assert spec.name == "sglang-dsv4-decode"


def test_multi_host_router_reaches_workers_by_internal_address():
    inv = copy.deepcopy(load_inventory(EXAMPLE))
    from pdctl.inventory import parse_inventory

    data = {
        "hosts": {
            "a": {"transport": "ssh", "address": "10.0.0.1", "internal_address": "10.0.0.1"},
            "b": {"transport": "ssh", "address": "10.0.0.2", "http": "tunnel"},
        },
        "roles": {
            "prefill": [{"host": "a", "port": 30000, "listen_host": "0.0.0.0"}],
            "decode": [{"host": "b", "port": 30002}],
            "router": [{"host": "b", "port": 30001}],
        },
    }
    inv = parse_inventory(data, "multi.yaml")
    router = launch.role_argv(inv, "router", 0)
    assert "http://10.0.0.1:30000" in router and "http://127.0.0.1:30002" in router
    # the prefill listens on every interface: it advertises the host's internal address to decode
    assert launch.role_env(inv, "prefill", 0)["SGLANG_HOST_IP"] == "10.0.0.1"
    assert "SGLANG_HOST_IP" not in launch.role_env(inv, "decode", 0)


def test_spec_changes_names_what_a_deploy_would_change_with_secrets_masked():
    from pdctl.services.base import ServiceSpec, spec_changes

    old = ServiceSpec("d", ("py", "--port", "30002"), {"HF_TOKEN": "hf_old_secret", "A": "1"})
    new = ServiceSpec(
        "d", ("py", "--port", "30002", "--disable-overlap-schedule"), {"HF_TOKEN": "hf_new_secret", "B": "2"}
    )
    lines = spec_changes(old, new)
    assert "command: +--disable-overlap-schedule" in lines
    assert "env: -A" in lines and "env: +B=2" in lines
    assert any(line.startswith("env: HF_TOKEN") for line in lines)
    assert "hf_" not in " ".join(lines)
    assert spec_changes(None, new) == ["new service"]
    assert spec_changes(new, new) == []


def _spec(inv, role, python):
    return launch.service_spec(inv, role, 0, python=python)


def test_the_interpreter_is_kept_from_the_installed_spec_not_taken_from_pdctls_environment():
    inv = embedded_default()
    installed = {
        ("prefill", 0): _spec(inv, "prefill", "/opt/engine/bin/python"),
        ("decode", 0): None,
        ("router", 0): _spec(inv, "router", "/opt/other/bin/python"),
    }
    got = launch.resolved_pythons(inv, installed)
    assert got[("prefill", 0)] == ("/opt/engine/bin/python", "installed")
    assert got[("router", 0)] == ("/opt/other/bin/python", "installed")  # a running role keeps its own
    assert got[("decode", 0)] == ("/opt/engine/bin/python", "host")  # resolved once for the host


def test_a_first_deploy_uses_the_default_and_a_declared_interpreter_wins():
    import sys

    inv = embedded_default()
    first = launch.resolved_pythons(inv, {})
    assert set(first.values()) == {(sys.executable, "default")}
    inv.hosts["local"].python = "/declared/python"
    installed = {("prefill", 0): _spec(inv, "prefill", "/opt/engine/bin/python")}
    assert set(launch.resolved_pythons(inv, installed).values()) == {("/declared/python", "inventory")}


def test_only_a_command_pdctl_renders_records_an_interpreter():
    from pdctl.services.base import ServiceSpec

    inv = embedded_default()
    assert launch.recorded_python(_spec(inv, "decode", "/x/python")) == "/x/python"
    assert launch.recorded_python(ServiceSpec("hand", ("/usr/bin/sleep", "100"))) is None
    assert launch.recorded_python(ServiceSpec("hand", ("/x/python", "-m", "something.else"))) is None
    assert launch.recorded_python(None) is None
