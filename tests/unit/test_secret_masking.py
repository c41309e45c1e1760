"""Secrets masked by value as well as by name (issue 9, item 4): every element of a list-valued secret flag, values
starting with "--", playbook vars that look secret or are marked `--secret-var`, and an inventory secret written
literally in a playbook; none of them in the plan, the step lines, `--json` or the audit log. Role logs are 0600.
Playbook runs go through the CLI with real shell steps on the local host; the pidfile test starts a real process."""

from __future__ import annotations

import json
import os
import stat

import pytest
import yaml
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.secrets import MASK, mask_argv, mask_text, secret_arg_values, secret_values

# -- the value shapes --------------------------------------------------------------------------------------------


def test_every_element_of_a_list_valued_secret_flag_is_masked():
    argv = ["python3", "-m", "sglang.launch_server", "--api-key", "sk-first", "sk-second", "--port", "30000"]
    assert mask_argv(argv) == ["python3", "-m", "sglang.launch_server", "--api-key", MASK, MASK, "--port", "30000"]
    assert secret_values({}, argv) == {"sk-first", "sk-second"}
    assert secret_arg_values({"--api-key": ["sk-first", "--sk-dash"], "--port": 1, "--enable-auth": True}) == {
        "sk-first",
        "--sk-dash",
    }


def test_a_secret_value_starting_with_dashes_is_masked():
    argv = ["sglang", "--api-key", "--looks-like-a-flag", "--port", "1", "--admin-api-key=--also", "HF_TOKEN=--x"]
    assert mask_argv(argv) == [
        "sglang",
        "--api-key",
        MASK,
        "--port",
        "1",
        f"--admin-api-key={MASK}",
        f"HF_TOKEN={MASK}",
    ]
    assert secret_values({}, argv) == {"--looks-like-a-flag", "--also", "--x"}
    out = mask_text("cmd: sglang --api-key --looks-like-a-flag --port 1 --api-key=--also")
    assert "looks-like-a-flag" not in out and "--also" not in out and "--port 1" in out


def test_mask_argv_by_value_and_ordinary_flags_untouched():
    argv = ["curl", "-H", "Bearer hf_inventory_value", "--max-total-tokens", "4096"]
    assert mask_argv(argv, ["hf_inventory_value"]) == ["curl", "-H", f"Bearer {MASK}", "--max-total-tokens", "4096"]
    assert mask_argv(["--disable-overlap-schedule", "--port", "30002"]) == [
        "--disable-overlap-schedule",
        "--port",
        "30002",
    ]


# -- playbook runs -------------------------------------------------------------------------------------------------

INV_SECRET = "hf_inventory_secret_42"
VAR_SECRET = "sk-live-var-123456"
MARKED = "it's hunter2 marked"  # has a quote: shell-quoted in the step's env assignment, no longer the raw text


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    inv = {
        "name": "masking",
        "roles": {
            "prefill": [{"port": 30000, "bootstrap_port": 8998}],
            "decode": [{"port": 30002, "env": {"HF_TOKEN": INV_SECRET}}],
            "router": [{"port": 30001}],
        },
    }
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(inv))
    pb = {
        "name": "leaky",
        "steps": [
            {"name": "var", "action": "shell", "args": {"role": "decode", "command": "echo token ${api_token}"}},
            {
                "name": "marked",
                "action": "shell",
                "args": {"role": "decode", "command": "echo pw ${pw}"},
                "gate": {"exit_code": 0},
            },
            # the shell step scrubs its output at the source and the gate is masked alike; this gate fails (the output
            # lacks " and more") and its words quote the secret
            {
                "name": "literal",
                "action": "shell",
                "args": {"role": "decode", "command": f"echo {INV_SECRET}"},
                "gate": {"stdout_contains": f"{INV_SECRET} and more"},
                "on_failure": "continue",
            },
            {
                "name": "after",
                "action": "shell",
                "args": {"role": "decode", "command": "echo ${api_token}; exit 2"},
                "gate": {"exit_code": 2},
            },
        ],
    }
    (tmp_path / "pb.yaml").write_text(yaml.safe_dump(pb, sort_keys=False))
    return tmp_path


def _run(env, *extra):
    return CliRunner().invoke(
        app,
        [
            "run",
            str(env / "pb.yaml"),
            "-i",
            str(env / "inv.yaml"),
            "--var",
            f"api_token={VAR_SECRET}",
            "--secret-var",
            f"pw={MARKED}",
            *extra,
        ],
    )


def _no_secret(text: str) -> None:
    for s in (INV_SECRET, VAR_SECRET, "hunter2"):
        assert s not in text, (s, text)


def test_dry_run_plan_and_json_hold_no_secret(env):
    r = _run(env, "--dry-run")
    assert r.exit_code == 0, r.output
    _no_secret(r.output)
    assert f"api_token={MASK}" in r.output and f"pw={MASK}" in r.output
    assert f"env PDCTL_VAR_api_token={MASK} sh -c 'echo token \"${{PDCTL_VAR_api_token}}\"'" in r.output
    assert f"stdout_contains: {MASK} and more" in r.output
    doc = json.loads(_run(env, "--dry-run", "--json").stdout)
    _no_secret(json.dumps(doc))
    assert doc["vars"] == {"api_token": MASK, "pw": MASK}
    assert (
        doc["steps"][2]["gate"] == {"stdout_contains": f"{MASK} and more"}
        and doc["steps"][0]["command"]
        == f"shell on decode[0]: env PDCTL_VAR_api_token={MASK} sh -c 'echo token \"${{PDCTL_VAR_api_token}}\"'"
    )


def test_run_step_lines_summary_json_and_audit_hold_no_secret(env):
    r = _run(env)
    assert r.exit_code == 1, r.output  # step 3's gate failed (on_failure: continue)
    _no_secret(r.stdout + r.stderr)
    assert f"==> step 1/4 var: shell on decode[0]: env PDCTL_VAR_api_token={MASK} sh -c" in r.stderr
    assert f"==> step 3/4 literal: shell on decode[0]: echo {MASK}" in r.stderr
    assert f"stdout lacks '{MASK} and more'" in r.stdout and "PASS" not in r.stdout.splitlines()[-1]
    res = _run(env, "--json")
    _no_secret(res.stdout)
    doc = json.loads(res.stdout)
    assert [s["status"] for s in doc["steps"]] == ["passed", "passed", "failed", "passed"]
    assert doc["steps"][0]["result"]["stdout"].strip() == f"token {MASK}"
    assert doc["steps"][1]["result"]["stdout"].strip() == f"pw {MASK}"
    assert doc["steps"][2]["gate"] == f"failed: stdout lacks '{MASK} and more'"
    assert doc["result"] == f"failed at step 3 'literal': stdout lacks '{MASK} and more'"
    raw = (env / "audit.jsonl").read_text()
    _no_secret(raw)
    records = [json.loads(x) for x in raw.splitlines()]
    assert [rec["action"] for rec in records] == ["run leaky"] * 4  # each run: started, then its end
    assert records[0]["result"] == "started" and records[0]["args"]["vars"] == {"api_token": MASK, "pw": MASK}
    records = [rec for rec in records if rec["result"] != "started"]
    assert records[0]["args"]["vars"] == {"api_token": MASK, "pw": MASK}
    assert records[0]["steps"][2]["gate"] == f"failed: stdout lacks '{MASK} and more'"
    assert records[0]["result"] == f"failed at step 3 'literal': stdout lacks '{MASK} and more'"


def test_secret_var_errors_do_not_echo_the_value(env):
    r = CliRunner().invoke(app, ["run", str(env / "pb.yaml"), "--secret-var", "bad name=hunter2-value"])
    assert r.exit_code == 2 and "--secret-var" in r.output and "hunter2" not in r.output


# -- role logs -----------------------------------------------------------------------------------------------------


def test_role_log_is_written_0600(tmp_path):
    from pdctl.services.base import ServiceSpec
    from pdctl.services.pidfile import PidfileManager
    from pdctl.transport.local import LocalTransport

    m = PidfileManager(LocalTransport(), str(tmp_path / "state"), command_timeout=10)
    log = tmp_path / "state" / "svc.log"
    log.parent.mkdir(parents=True)
    log.write_text("an older process's lines\n")
    os.chmod(log, 0o644)  # an existing log from before is tightened too
    try:
        m.install(ServiceSpec("svc", ("/bin/sh", "-c", "echo up; sleep 30"), env={}, workdir=str(tmp_path)))
        m.start("svc")
        assert stat.S_IMODE(os.stat(m.log_path("svc")).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(m.spec_path("svc")).st_mode) == 0o600
    finally:
        m.stop("svc", grace=1)


def test_a_gate_on_a_secret_var_and_a_gate_with_a_var_are_judged_as_the_step_saw(env):
    """`--secret-var v=...` with `stdout_contains: "build=<v>"` failed: the output was masked before the gate and
    the gate was not. `${v}` in a gate was compared literally. Both pass now; the plan shows the gate masked."""
    pb = {
        "name": "gates",
        "steps": [
            {
                "name": "literal",
                "action": "shell",
                "args": {"role": "decode", "command": "echo build=${v}"},
                "gate": {"stdout_contains": "build=abcd1234"},
            },
            {
                "name": "substituted",
                "action": "shell",
                "args": {"role": "decode", "command": "echo build=${v}"},
                "gate": {"stdout_contains": "build=${v}"},
            },
        ],
    }
    (env / "gates.yaml").write_text(yaml.safe_dump(pb, sort_keys=False))
    run = ["run", str(env / "gates.yaml"), "-i", str(env / "inv.yaml"), "--json"]
    r = CliRunner().invoke(app, [*run, "--secret-var", "v=abcd1234"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [s["status"] for s in doc["steps"]] == ["passed", "passed"] and "abcd1234" not in r.stdout
    r = CliRunner().invoke(app, [*run, "--var", "v=abcd1234"])  # the same value, not secret: the same verdicts
    assert r.exit_code == 0, r.output
    assert [s["status"] for s in json.loads(r.stdout)["steps"]] == ["passed", "passed"]


@pytest.mark.parametrize("flag", ["--db-pwd", "--db-passphrase"])
def test_a_password_flag_by_another_name_is_masked(flag):
    """Issue 28 S2, second re-pass: names outside the word list (a passphrase flag, a -pwd flag) showed."""
    assert mask_argv(["x", flag, "s3cr3t-v", "--port", "30000"]) == ["x", flag, MASK, "--port", "30000"]


@pytest.mark.parametrize("name", ["MYSQL_PWD", "DB_PASSPHRASE"])
def test_a_password_env_by_another_name_is_masked_and_the_shells_pwd_is_not(name):
    from pdctl.secrets import mask_env

    env = {name: "s3cr3t-v", "PWD": "/srv/app", "OLDPWD": "/root"}
    assert mask_env(env) == {name: MASK, "PWD": "/srv/app", "OLDPWD": "/root"}


def test_an_http_credential_in_a_log_line_is_masked_and_prose_is_not():
    line = 'curl -H "Authorization: Bearer eyJhbGciOi.payload.sig" http://h; authorization: Basic dXNlcjpwYXNzd29yZA=='
    out = mask_text(line)
    assert "eyJhbGciOi" not in out and "dXNlcjpw" not in out
    assert '"Authorization: Bearer ***"' in out and "authorization: Basic ***" in out
    prose = "Basic configuration loaded; Token validation enabled; bearer of news"
    assert mask_text(prose) == prose
