"""A `${...}` in a playbook shell command reaches the shell as data in any quotes (issue 28, S1): each becomes a
reference to an environment variable (`shell_refs`); a context where that cannot hold is refused at load. Run by the
real dash and bash, and end to end through `pdctl run` with a `--var` and an inventory value."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.inventory import embedded_default
from pdctl.playbook.shell_refs import Where, bind_refs, find_refs, refused_refs
from pdctl.playbook.vars import VarError

SHELLS = [s for s in ("/bin/sh", shutil.which("dash"), shutil.which("bash")) if s]


def _evil(tmp_path) -> str:
    """A value that runs `touch` in every way a shell could be tricked into it, plus what quoting breaks on."""
    f = tmp_path / "pwned"
    return f"$(touch {f}) `touch {f}` '; touch {f}; ' \"; touch {f}; \" \\ * {{a,b}} $HOME\n2nd line"


def _run_bound(shell: str, command: str, value: str) -> str:
    text, env = bind_refs(command, lambda _name: value)
    r = subprocess.run([shell, "-c", text], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True)
    assert r.returncode == 0, (text, r.stderr)
    return r.stdout


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(
    "command, want",
    [
        ("printf %s ${msg}", "{v}"),  # unquoted: one word, not split, not globbed
        ('printf %s "in double quotes: ${msg}"', "in double quotes: {v}"),  # the reproduction
        ("printf %s 'in single quotes: ${msg}'", "in single quotes: {v}"),
        ('printf %s "$(printf %s ${msg})"', "{v}"),  # unquoted inside $(...) inside double quotes
        ('printf %s "a $(printf "%s" "<${msg}>") b"', "a <{v}> b"),
        ('printf %s "`printf %s ${msg}`"x', "{v}x"),
        ('x=`printf %s ${msg}`; printf %s "$x"', "{v}"),
        ("printf %s ${msg}${msg}", "{v}{v}"),
        ('printf %s x # don\'t ${msg}\nprintf %s "${msg}"', "x{v}"),  # a comment's apostrophe opens no quote
        ("cat <<EOF\nbody ${msg} don't\nEOF\nprintf %s '${msg}'", "body {v} don't\n{v}"),
    ],
)
def test_a_value_is_data_in_every_quoting_context(tmp_path, shell, command, want):
    v = _evil(tmp_path)
    assert _run_bound(shell, command, v) == want.format(v=v)
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(
    "command, where",
    [
        ("echo $((${n} + 1))", Where.ARITH),
        ("(( ${n} > 1 )) && echo big", Where.ARITH),
        ("echo $'tab\\t${n}'", Where.ANSI_C),
        ("cat <<'EOF'\n${n}\nEOF", Where.QUOTED_HEREDOC),
        ('echo "\\${n}"', Where.ESCAPED),
    ],
)
def test_a_context_that_would_evaluate_or_not_expand_the_value_is_refused(command, where):
    assert [r.where for r in find_refs(command)] == [where]
    assert refused_refs(command) and "${n}" in refused_refs(command)[0]
    with pytest.raises(VarError, match="cannot be passed there as data"):
        bind_refs(command, lambda _n: "1")


def test_names_are_prefixed_shared_by_one_ref_and_kept_apart_from_the_steps_env():
    values = {"inventory.name": "x", "msg": "y", "vars.msg": "y"}
    text, env = bind_refs('echo ${inventory.name} "${msg}" ${vars.msg} $${HOME}', values.get, {"PDCTL_VAR_msg"})
    assert env == {"PDCTL_VAR_inventory_name": "x", "PDCTL_VAR_msg_2": "y"}
    assert text == 'echo "${PDCTL_VAR_inventory_name}" "${PDCTL_VAR_msg_2}" "${PDCTL_VAR_msg_2}" ${HOME}'


# ---- end to end: `pdctl run` on this machine (shell steps need no engine)


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("PDCTL_AUDIT_LOG", raising=False)
    return tmp_path


def _playbook(tmp_path, steps) -> str:
    p = tmp_path / "pb.yaml"
    p.write_text(yaml.safe_dump({"name": "s1", "vars": {"msg": "x"}, "steps": steps}, sort_keys=False))
    return str(p)


def _shell(name, command):
    return {"name": name, "action": "shell", "args": {"role": "decode", "command": command}}


def test_a_var_in_double_quotes_is_echoed_not_run(env):
    """The reproduction: `echo "in double quotes: ${msg}"` with --var 'msg=$(touch F)'; and its variant polled by
    `wait until` (the args of the step it polls are filled in as that kind's)."""
    f = env / "F"
    until = {"action": "shell", "args": {"role": "decode", "command": "echo \"'${msg}'\""}}
    pb = _playbook(
        env,
        [
            _shell("dq", 'echo "in double quotes: ${msg}"'),
            {"name": "w", "action": "wait", "args": {"until": until, "timeout": 5}},
        ],
    )
    r = CliRunner().invoke(app, ["run", pb, "--json", "--var", f"msg=$(touch {f})`touch {f}`"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["steps"][0]["result"]["stdout"] == f"in double quotes: $(touch {f})`touch {f}`\n"
    assert f"exit 0 on local: '$(touch {f})`touch {f}`'" in doc["steps"][1]["result"]["summary"]
    assert not f.exists()


def test_an_inventory_value_in_quotes_is_echoed_not_run(env):
    f = env / "F"
    data = embedded_default().dump()
    data["served_model_name"] = f"m$(touch {f})`touch {f}`"
    inv = env / "inv.yaml"
    inv.write_text(yaml.safe_dump(data))
    pb = _playbook(env, [_shell("model", "echo \"model='${inventory.served_model_name}'\" 'and ${inventory.name}'")])
    r = CliRunner().invoke(app, ["run", pb, "-i", str(inv), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["steps"][0]["result"]["stdout"] == f"model='m$(touch {f})`touch {f}`' and local\n"
    assert not f.exists()


def test_a_ref_in_arithmetic_is_refused_at_load_naming_the_step_and_field(env):
    pb = _playbook(env, [_shell("count", "echo $(( ${msg} + 1 ))")])
    r = CliRunner().invoke(app, ["run", pb, "--dry-run", "--var", "msg=a[$(touch x)]"])
    assert r.exit_code == 2, r.output
    assert "step 1 'count', field 'args.command'" in r.output and "arithmetic" in r.output
