"""Declared secrets masked by value whatever their shape (issue 9, item 4): an env NAME holding a declared secret
value, `--secret-var` values taken as text exactly as given (never YAML-typed: 0777 is not 511), and secrets under
4 characters masked where they stand as whole tokens. Through the real CLI (deploy --dry-run, render, run) with
state in a temporary directory; pure masking functions directly."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.playbook.vars import parse_cli_vars
from pdctl.secrets import MASK, mask_env, mask_text

SECRET = "hf_INVSECRET_9876"


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    inv = {
        "name": "sec",
        "roles": {
            "prefill": [{"port": 30000, "bootstrap_port": 8998}],
            "decode": [
                {
                    "port": 30002,
                    "args": {"--auth": "short"},
                    "env": {"HF_TOKEN": SECRET, "ZZ_" + SECRET: "1", "OTHER": "x", "URL": f"https://u:{SECRET}@h"},
                }
            ],
            "router": [{"port": 30001}],
        },
    }
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(inv))
    return tmp_path


# -- an env name holding a secret ------------------------------------------------------------------------------


def test_mask_env_scrubs_declared_secrets_from_names_and_values():
    got = mask_env(
        {
            "HF_TOKEN": SECRET,
            "ZZ_" + SECRET: "1",
            "OTHER": "x",
            "A_" + SECRET + "_B": "2",
            "URL": f"https://u:{SECRET}@h",
        },
        {SECRET},
    )
    assert got == {"HF_TOKEN": MASK, "ZZ_***": MASK, "OTHER": "x", "A_***_B": MASK, "URL": f"https://u:{MASK}@h"}
    assert mask_env({"ZZ_" + SECRET: "1"}) == {"ZZ_" + SECRET: MASK}  # no secrets given: names as they are
    two = mask_env({"P_" + SECRET: "a", "P_sk_other_secret_1": "b", "P_x": "c"}, {SECRET, "sk_other_secret_1"})
    assert sorted(two) == ["P_***", "P_***#2", "P_x"]  # none lost to a collision


@pytest.mark.parametrize(
    "command", [["deploy", "--dry-run"], ["deploy", "--dry-run", "--json"], ["render"], ["render", "--json"]]
)
def test_no_plan_or_rendering_shows_a_secret_inside_an_env_name(env, command):
    r = CliRunner().invoke(app, [*command, "-i", str(env / "inv.yaml")])
    assert r.exit_code == 0, r.output
    assert SECRET not in r.output and "short" not in r.output, r.output
    assert "ZZ_***" in r.output and "OTHER" in r.output
    if "--json" in command:
        doc = json.loads(r.stdout)
        roles = doc["plan"]["roles"] if "plan" in doc else doc["roles"]
        dec = next(x for x in roles if x["role"] == "decode")
        assert dec["env"]["ZZ_***"] == MASK and dec["env"]["OTHER"] == "x" and dec["env"]["OMP_NUM_THREADS"] == "1"
        assert "--auth" in dec["argv"] and "short" not in dec["argv"]


# -- --secret-var values are text; short secrets are masked ------------------------------------------------------


def test_secret_vars_are_text_exactly_as_given():
    assert parse_cli_vars(["v=0777", "w=0x1F", "x=true", "y=", "z= a "], "--secret-var", secret=True) == {
        "v": "0777",
        "w": "0x1F",
        "x": "true",
        "y": "",
        "z": " a ",
    }
    assert parse_cli_vars(["api_token=0777", "n=0777", "b=true"]) == {"api_token": "0777", "n": "0777", "b": True}


def test_short_declared_secrets_are_masked_as_whole_tokens_only():
    text = "key abc x=abc 'abc' abcdef xabc --x --xyz a-abc abc."
    assert mask_text(text, {"abc", "--x"}) == f"key {MASK} x={MASK} '{MASK}' abcdef xabc {MASK} --xyz a-abc {MASK}."
    # a bare number or switch word would mask every count and step number: masked by name only
    assert mask_text("step 1 of 1, exit 1, on", {"1", "on"}) == "step 1 of 1, exit 1, on"


def test_run_masks_octal_hex_and_short_secret_vars_everywhere(env):
    pb = {
        "name": "pbshort",
        "steps": [
            {
                "name": "s",
                "action": "shell",
                "args": {
                    "role": "decode",
                    "command": "echo ${v} ${w} ${x} ${y} abcdef; test ${v} = 0777 && test ${w} = 0x1F",
                },
            }
        ],
    }
    (env / "pb.yaml").write_text(yaml.safe_dump(pb))
    args = [
        "run",
        str(env / "pb.yaml"),
        "-i",
        str(env / "inv.yaml"),
        "--secret-var",
        "v=0777",
        "--secret-var",
        "w=0x1F",
        "--secret-var",
        "x=abc",
        "--secret-var",
        "y=--x",
    ]
    dry = CliRunner().invoke(app, [*args, "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.stdout)
    assert plan["vars"] == {"v": MASK, "w": MASK, "x": MASK, "y": MASK}
    assert plan["steps"][0]["command"].startswith(
        f"shell on decode[0]: env PDCTL_VAR_v={MASK} PDCTL_VAR_w={MASK} PDCTL_VAR_x={MASK} PDCTL_VAR_y={MASK} sh -c"
    )
    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output  # the step saw 0777 and 0x1F as given, not 511 and 31
    doc = json.loads(r.stdout)
    assert doc["steps"][0]["result"]["stdout"].strip() == f"{MASK} {MASK} {MASK} {MASK} abcdef"
    shown = CliRunner().invoke(app, args)
    log = (env / "audit.jsonl").read_text()
    for text in (dry.output, r.output, shown.output, log):
        for leaked in ("0777", "511", "0x1F", " 31 ", " abc ", "--x "):
            assert leaked not in text, (leaked, text)


def test_deploy_change_lines_never_show_a_declared_secret():
    """`deploy --dry-run`'s change lines: an env name that embeds the token's value, and a changed token itself."""
    from pdctl.services.base import ServiceSpec, spec_changes

    old = ServiceSpec("d", ("python3", "-m", "x"), env={"HF_TOKEN": "hf_oldsecret123"})
    new = ServiceSpec("d", ("python3", "-m", "x"), env={"HF_TOKEN": "hf_newsecret456", "ZZ_hf_newsecret456": "1"})
    text = "\n".join(spec_changes(old, new))
    assert "hf_oldsecret123" not in text and "hf_newsecret456" not in text, text
    assert "HF_TOKEN" in text and "ZZ_" in text
