"""`pdctl render`: what deploy would write, from the inventory alone, with no host contacted (issue 10, item 8)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pdctl import launch
from pdctl.cli.app import app
from pdctl.inventory import load_inventory
from pdctl.services.systemd import render_unit

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "seed-production.yaml"


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "80")


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to resolve a name or open a connection fails the test."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise AssertionError(f"render tried the network: {args}")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    return attempts


def _render(*args: str):
    return CliRunner().invoke(app, ["render", *args])


def test_the_seed_example_renders_offline_exactly_as_deploy_writes_it(no_network):
    r = _render("-i", str(EXAMPLE))
    assert r.exit_code == 0, r.output
    assert not no_network
    inv = load_inventory(EXAMPLE)
    for role, i, _ in inv.instances():
        spec = launch.service_spec(inv, role, i)
        assert f"/etc/systemd/system/{spec.name}.service:" in r.output
        for line in render_unit(spec).splitlines():  # the unit deploy would write, line by line, unfolded
            assert line.strip() in r.output
    assert "no host was contacted" in r.output
    assert "/opt/sglang/venv/bin/python  (declared)" in r.output


def test_a_host_on_a_listening_port_is_never_dialled(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    try:
        data = yaml.safe_load(EXAMPLE.read_text())
        data["hosts"]["gpu1"].update(address="127.0.0.1", port=listener.getsockname()[1])
        inv = tmp_path / "inv.yaml"
        inv.write_text(yaml.safe_dump(data))
        r = _render("-i", str(inv), "--json")
        assert r.exit_code == 0, r.output
        assert [x["service"] for x in json.loads(r.stdout)["roles"]] == [
            "sglang-dsv4-prefill",
            "sglang-dsv4-decode",
            "sglang-dsv4-router",
        ]
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    finally:
        listener.close()


def _inventory_with_secrets(tmp_path: Path, **host) -> Path:
    data = yaml.safe_load(EXAMPLE.read_text())
    data["roles"]["decode"][0]["env"]["HF_TOKEN"] = "hf_supersecretvalue"
    data["roles"]["router"][0]["args"] = {"--api-key": "router-key-12345"}
    data["hosts"]["gpu1"].update(host)
    path = tmp_path / "secret.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("manager", ["systemd", "pidfile"])
def test_secrets_are_masked_in_command_env_unit_and_launcher(tmp_path, manager, no_network):
    inv = _inventory_with_secrets(tmp_path, service_manager=manager)
    text = _render("-i", str(inv))
    doc = _render("-i", str(inv), "--json")
    assert text.exit_code == doc.exit_code == 0, text.output
    for out in (text.output, doc.stdout):
        assert "hf_supersecretvalue" not in out and "router-key-12345" not in out
        assert "HF_TOKEN=***" in out
    roles = {r["role"]: r for r in json.loads(doc.stdout)["roles"]}
    assert roles["decode"]["env"]["HF_TOKEN"] == "***"
    assert roles["router"]["argv"][roles["router"]["argv"].index("--api-key") + 1] == "***"
    if manager == "pidfile":
        assert roles["decode"]["path"] == "/var/lib/pdctl/sglang-dsv4-decode.json"
        assert "setsid env -i" in roles["decode"]["launcher"]
    else:
        assert roles["decode"]["launcher"] is None and "ExecStart=" in roles["decode"]["text"]


def test_role_selects_a_role_or_an_instance_and_an_unknown_one_is_a_usage_error():
    doc = json.loads(_render("-i", str(EXAMPLE), "--role", "decode", "--json").stdout)
    assert [r["label"] for r in doc["roles"]] == ["decode[0]@gpu1:30002"] and doc["offline"] is True
    doc = json.loads(_render("-i", str(EXAMPLE), "--role", "router[0]", "--json").stdout)
    assert [r["role"] for r in doc["roles"]] == ["router"]
    bad = _render("-i", str(EXAMPLE), "--role", "proxy")
    assert bad.exit_code == 2 and "--role proxy: no such role" in bad.output and "prefill[0]" in bad.output


def test_an_undeclared_interpreter_is_the_first_deploy_default_and_said_so(tmp_path):
    import sys

    r = _render("--role", "decode")  # the embedded default: a local host, no python declared
    assert r.exit_code == 0, r.output
    assert f"python: {sys.executable}" in r.output and "a first deploy records this one" in " ".join(r.output.split())


def test_a_unit_deploy_could_not_write_is_said_and_fails(tmp_path):
    data = yaml.safe_load(EXAMPLE.read_text())
    del data["hosts"]["gpu1"]["python"]  # systemd needs an absolute ExecStart; the ssh default is python3
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump(data))
    r = _render("-i", str(inv), "--json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["ok"] is False
    assert all(
        "ExecStart needs an absolute path" in x["problem"] and "hosts.gpu1.python" in x["problem"] for x in doc["roles"]
    )
