"""A role's `args` cannot set a flag pdctl sets itself (its port, host, disaggregation mode, the router's workers):
the inventory is refused at load, exit 2, one line per such flag naming the field to use instead. Abbreviations
and aliases the engines' parsers accept count too, checked against the real bundled-engine and router parsers."""

from __future__ import annotations

import argparse

import pytest

from pdctl import launch
from pdctl.managed_flags import managed_flags
from pdctl.errors import InventoryError
from pdctl.inventory import parse_inventory
from tests.e2e.helpers import pdctl, write_inventory


def _data(prefill_args=None, router_args=None, **top):
    return {
        "name": "mf",
        **top,
        "roles": {
            "prefill": [{"port": 41000, "bootstrap_port": 41001, "args": prefill_args or {}}],
            "decode": [{"port": 41002}],
            "router": [{"port": 41003, "args": router_args or {}}],
        },
    }


def test_render_refuses_a_prefill_whose_args_override_port_mode_and_host(tmp_path):
    inv = write_inventory(
        tmp_path / "inv.yaml", _data({"--port": 42000, "--disaggregation-mode": "decode", "--host": "0.0.0.0"})
    )
    r = pdctl(["render", "-i", str(inv)], state=tmp_path / "state")
    assert r.code == 2, r.output
    assert "Traceback" not in r.output
    for line in (
        "roles.prefill.0.args.--port: set by pdctl from roles.prefill.0.port; use that",
        "roles.prefill.0.args.--disaggregation-mode: set by pdctl from the role (prefill)",
        "roles.prefill.0.args.--host: set by pdctl from roles.prefill.0.listen_host",
    ):
        assert line in r.stderr, r.stderr
    j = pdctl(["render", "-i", str(inv), "--json"], state=tmp_path / "state")
    assert j.code == 2 and j.json()["error"]["kind"] == "usage"
    assert "roles.prefill.0.args.--port" in j.json()["error"]["message"]


@pytest.mark.parametrize(
    "args, field, source",
    [
        ({"--port=42000": True}, "args.--port=42000", "roles.prefill.0.port"),
        ({"--po": 42000}, "args.--po", "roles.prefill.0.port"),
        (
            {"--disaggregation-bootstrap-port": 9},
            "args.--disaggregation-bootstrap-port",
            "roles.prefill.0.bootstrap_port",
        ),
        ({"--enable-metrics": False}, "args.--enable-metrics", "always on"),
        ({"--served-model-name": "x"}, "args.--served-model-name", "served_model_name"),
        (
            {"--disaggregation-transfer-backend": "mooncake"},
            "args.--disaggregation-transfer-backend",
            "transfer_backend",
        ),
    ],
)
def test_every_flag_pdctl_sets_on_a_worker_is_refused_in_args(args, field, source):
    with pytest.raises(InventoryError) as e:
        parse_inventory(_data(args), "inv.yaml")
    assert f"roles.prefill.0.{field}:" in e.value.message and source in e.value.message


@pytest.mark.parametrize(
    "args",
    [
        {"--prefill": ["http://10.0.0.9:1", 8998]},
        {"--decode": "http://10.0.0.9:2"},
        {"--pd-disaggregation": True},
        {"--port": 1},
        {"--host": "0.0.0.0"},
    ],
)
def test_the_routers_own_flags_are_refused_in_its_args(args):
    with pytest.raises(InventoryError) as e:
        parse_inventory(_data(router_args=args), "inv.yaml")
    assert f"roles.router.0.args.{next(iter(args))}: " in e.value.message


def test_model_alias_is_refused_only_when_pdctl_sets_the_model_path():
    with pytest.raises(InventoryError) as e:
        parse_inventory(_data({"--model": "/m2"}, model_path="/m"), "inv.yaml")
    assert (
        "roles.prefill.0.args.--model: the engine may read it as --model-path, set by pdctl from model_path"
        in e.value.message
    )
    parse_inventory(_data({"--model": "/m2"}), "inv.yaml")  # no model_path: pdctl sets none, nothing overridden


def test_other_args_still_load():
    inv = parse_inventory(
        _data(
            {"--mem-fraction-static": 0.8, "--api-key": "k"},
            {"--health-check-interval-secs": 2, "--prometheus-port": 29000},
        ),
        "inv.yaml",
    )
    assert "--mem-fraction-static" in launch.role_argv(inv, "prefill", 0)


def _parser_spellings(parser: argparse.ArgumentParser, flag: str) -> list[str]:
    """Every spelling the parser reads as `flag`: its aliases and their unique abbreviations."""
    dest = parser._option_string_actions[flag].dest
    names = [s for s, a in parser._option_string_actions.items() if a.dest == dest and s.startswith("--")]
    out = set(names)
    for name in names:
        for n in range(3, len(name)):
            hits = {
                parser._option_string_actions[s].dest for s in parser._option_string_actions if s.startswith(name[:n])
            }
            if hits == {dest}:
                out.add(name[:n])
    return sorted(out)


@pytest.mark.parametrize("role", ["prefill", "router"])
def test_every_spelling_the_real_parser_accepts_for_a_managed_flag_is_refused(role):
    from engine.server_args import build_parser
    from sglang_router.router_args import RouterArgs

    if role == "router":
        parser = argparse.ArgumentParser()
        RouterArgs.add_cli_args(parser, use_router_prefix=False)
    else:
        parser = build_parser()
    parse_inventory(_data(model_path="/m"), "inv.yaml")  # the inventory these flags come from is valid
    for flag in managed_flags(role, 0, model_path=True):
        for spelling in _parser_spellings(parser, flag):
            data = _data(model_path="/m", **{})
            data["roles"][role][0]["args"] = {spelling: "1"}
            with pytest.raises(InventoryError, match=f"roles.{role}.0.args.{spelling}: "):
                parse_inventory(data, "inv.yaml")


@pytest.mark.parametrize("model_path", [None, "/m"])
def test_the_managed_list_is_what_launch_writes(model_path):
    """managed_flags names every flag launch puts on each role's command line, and no other: the two lists are
    kept apart only so that the inventory's validation need not import launch."""
    inv = parse_inventory(_data(**({"model_path": model_path} if model_path else {})), "inv.yaml")
    for role, i, _inst in inv.instances():
        written = {t for t in launch.role_argv(inv, role, i) if t.startswith("--")}
        assert set(managed_flags(role, i, model_path=bool(model_path))) == written
