"""A flag value starting with "-" is rendered as one token `--flag=value` (argparse would read `--api-key --x` as
two flags and refuse to start), the flags judge reads `--flag=value` as `--flag value`, and a list whose elements
start with "-" (which no argparse command line can carry) is refused naming the field before anything runs."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from pdctl import launch
from pdctl.checks.flags import judge_flags, judge_undeclared
from pdctl.checks.result import Status
from pdctl.cli.app import app
from pdctl.errors import InventoryError
from pdctl.inventory import load_inventory
from pdctl.secrets import MASK, mask_argv


def _inv(tmp_path, decode_args, served="pdctl-tiny"):
    inv = {
        "name": "dash",
        "served_model_name": served,
        "roles": {
            "prefill": [{"port": 30000, "bootstrap_port": 8998}],
            "decode": [{"port": 30002, "args": decode_args}],
            "router": [{"port": 30001}],
        },
    }
    p = tmp_path / "inv.yaml"
    p.write_text(yaml.safe_dump(inv))
    return p


def test_a_value_starting_with_a_dash_is_one_token():
    assert launch.flag_tokens(
        {
            "--api-key": "--scalardash99",
            "--name": "-x",
            "--n": -5,
            "--one": ["--only"],
            "--nums": [-1, 2.5, "-.5"],
            "--port": 30000,
        }
    ) == [
        "--api-key=--scalardash99",
        "--name=-x",
        "--n=-5",
        "--one=--only",
        "--nums",
        "-1",
        "2.5",
        "-.5",
        "--port",
        "30000",
    ]


def test_a_list_with_an_element_starting_with_a_dash_is_refused_naming_the_field(tmp_path):
    inv = load_inventory(_inv(tmp_path, {"--api-key": ["--listkey1xx", "lk2secret"]}))
    with pytest.raises(InventoryError) as e:
        launch.role_argv(inv, "decode", 0)
    assert "roles.decode[0].args.--api-key" in e.value.message and "listkey1xx" not in e.value.message
    r = CliRunner().invoke(app, ["deploy", "--dry-run", "-i", str(tmp_path / "inv.yaml")])
    assert r.exit_code == 2 and "roles.decode[0].args.--api-key" in r.output and "lk2secret" not in r.output


def test_rendered_dash_values_round_trip_through_the_flags_judge(tmp_path):
    inv = load_inventory(
        _inv(tmp_path, {"--api-key": "--scalardash99", "--tags": ["--solo"], "--nums": [-1, 2]}, served="-x")
    )
    argv = launch.role_argv(inv, "decode", 0)
    assert "--api-key=--scalardash99" in argv and "--served-model-name=-x" in argv
    results = judge_flags("decode[0]", argv, {}, launch.declared_flags(inv, "decode", 0), {})
    bad = [(r.name, r.observed, r.detail) for r in results if r.status is not Status.PASS]
    assert not bad, bad
    got = {r.name: r for r in results}
    assert got["--served-model-name"].observed == "-x" and got["--api-key"].observed == MASK
    assert not judge_undeclared("decode[0]", argv, argv)  # `--x` inside `--f=--x` is no flag of its own
    assert "--scalardash99" not in " ".join(mask_argv(argv)) and f"--api-key={MASK}" in mask_argv(argv)


def test_the_judge_reads_both_forms_alike_and_the_two_token_form_as_drift():
    declared = {"--api-key": "--scalardash99", "--served-model-name": "-x"}
    eq = ["py", "--api-key=--scalardash99", "--served-model-name=-x"]
    assert all(r.status is Status.PASS for r in judge_flags("d", eq, {}, declared, {}))
    spaced = ["py", "--api-key", "k", "--served-model-name", "m"]
    assert all(
        r.status is Status.PASS
        for r in judge_flags("d", spaced, {}, {"--api-key": "k", "--served-model-name": "m"}, {})
    )
    split = ["py", "--api-key", "--scalardash99"]  # what argparse refuses: never a pass
    assert judge_flags("d", split, {}, {"--api-key": "--scalardash99"}, {})[0].status is Status.FAIL


def test_the_bundled_engine_parser_accepts_the_rendered_command_and_refuses_the_split_one(tmp_path, capsys):
    from engine.server_args import parse_args

    inv = load_inventory(_inv(tmp_path, {"--api-key": "--scalardash99"}, served="-x"))
    argv = launch.role_argv(inv, "decode", 0)
    args = parse_args(argv[3:]).as_dict()
    assert args["api_key"] == "--scalardash99" and args["served_model_name"] == "-x"
    with pytest.raises(SystemExit) as e:
        parse_args(["--disaggregation-mode", "decode", "--api-key", "--scalardash99"])
    assert e.value.code == 2 and "expected one argument" in capsys.readouterr().err
