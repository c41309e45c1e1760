"""Playbook schema: malformed playbooks are refused with exit 2, naming the file, the step (index and name) and
the field; vars substitute from the inventory and --var; the shipped playbooks all load and plan."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.errors import PlaybookError
from pdctl.inventory import embedded_default
from pdctl.playbook import runner
from pdctl.playbook.schema import load_playbook, parse_playbook, resolve_playbook, shipped_playbooks
from pdctl.playbook.vars import VarError, build_scope, parse_cli_vars, substitute

SHIPPED = ("final-health", "co-restart", "stall-triage", "abort-storm-ab", "deploy-fix")


def _write(tmp_path, data, name="pb.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data, sort_keys=False) if not isinstance(data, str) else data)
    return p


def _invoke(args, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    return CliRunner().invoke(app, args)


def _err(data) -> str:
    with pytest.raises(PlaybookError) as ei:
        parse_playbook(data, "pb.yaml")
    assert ei.value.exit_code == 2
    return ei.value.message


BASE = {
    "name": "t",
    "steps": [
        {"name": "one", "action": "verify"},
        {"name": "two", "action": "shell", "args": {"role": "decode", "command": "true"}},
    ],
}


def _with(step_index, **changes):
    import copy

    d = copy.deepcopy(BASE)
    d["steps"][step_index].update(changes)
    return d


@pytest.mark.parametrize(
    "data, field",
    [
        (_with(1, action="reboot"), "field 'action'"),
        (_with(1, gate={"verdict": ["drained"]}), "field 'gate.verdict'"),
        (_with(1, gate={"exit_code": "zero"}), "field 'gate.exit_code'"),
        (_with(1, args={"role": "decode", "command": "true", "bogus": 1}), "field 'args.bogus'"),
        (_with(1, on_failure="retry"), "field 'on_failure'"),
        (_with(1, on_failure={"run": "nowhere"}), "field 'on_failure.run'"),
        (_with(1, on_failure={"run": "one"}), "field 'on_failure.run'"),  # not a handler
        (_with(1, colour="red"), "field 'colour'"),
        (_with(1, name="one"), "field 'name'"),
        (_with(1, when="apply or else"), "field 'when'"),
    ],
)
def test_malformed_step_names_step_index_name_and_field(data, field):
    msg = _err(data)
    assert "pb.yaml" in msg
    assert "step 2 '" in msg and field in msg, msg


def test_missing_action_and_bad_layer_are_named():
    msg = _err({"name": "t", "steps": [{"name": "a"}]})
    assert "step 1 'a', field 'action': required field is missing" in msg
    msg = _err(_with(0, gate={"layers_pass": ["health", "vibes"]}))
    assert "step 1 'one', field 'gate.layers_pass'" in msg and "vibes" in msg


def test_top_level_errors():
    assert "steps" in _err({"name": "t", "steps": []})
    assert "field 'name'" in _err({"steps": [{"name": "a", "action": "verify"}]})
    assert "expected a mapping" in _err(["not", "a", "playbook"])


def test_bad_arg_value_after_substitution_names_step_and_field(tmp_path):
    pb = parse_playbook(
        {"name": "t", "vars": {"n": "many"}, "steps": [{"name": "w", "action": "wait", "args": {"seconds": "${n}"}}]},
        "pb.yaml",
    )
    with pytest.raises(PlaybookError) as ei:
        runner.plan(pb, embedded_default())
    assert "step 1 'w', field 'args.seconds'" in ei.value.message


def test_unknown_var_names_step_and_field():
    pb = parse_playbook(
        {
            "name": "t",
            "steps": [{"name": "s", "action": "shell", "args": {"role": "decode", "command": "echo ${nope}"}}],
        },
        "pb.yaml",
    )
    with pytest.raises(PlaybookError) as ei:
        runner.plan(pb, embedded_default())
    assert "step 1 's', field 'args'" in ei.value.message and "nope" in ei.value.message


def test_cli_malformed_playbook_exits_2_naming_step_and_field(tmp_path, monkeypatch):
    p = _write(tmp_path, _with(1, gate={"verdict": "drained"}))
    r = _invoke(["run", str(p)], tmp_path, monkeypatch)
    assert r.exit_code == 2, r.output
    assert str(p) in r.output and "step 2 'two'" in r.output and "gate.verdict" in r.output


def test_cli_invalid_yaml_and_missing_playbook_exit_2(tmp_path, monkeypatch):
    p = _write(tmp_path, "name: t\nsteps: [\n")
    r = _invoke(["run", str(p)], tmp_path, monkeypatch)
    assert r.exit_code == 2 and "not valid YAML" in r.output
    r = _invoke(["run", "no-such-playbook"], tmp_path, monkeypatch)
    assert r.exit_code == 2 and "final-health" in r.output  # lists what is shipped


def test_cli_bad_var_exits_2(tmp_path, monkeypatch):
    r = _invoke(["run", "final-health", "--var", "novalue", "--dry-run"], tmp_path, monkeypatch)
    assert r.exit_code == 2 and "NAME=VALUE" in r.output


def test_substitution_from_inventory_vars_and_cli():
    inv = embedded_default()
    scope = build_scope(
        inv, {"port": "${roles.decode.0.port}", "n": 3}, parse_cli_vars(["n=7", "who=ops team"]), apply=False
    )
    assert substitute("${roles.decode.0.port}", scope) == 30002  # whole string keeps its type
    assert substitute("${port}", scope) == 30002  # a playbook var built from the inventory
    assert substitute("n=${n} ${inventory.name}", scope) == "n=7 local"  # --var wins over the default
    assert substitute("$${literal}", scope) == "${literal}"
    assert substitute("${apply}", scope) is False
    from pdctl.playbook.kinds.shell import fill  # a shell command's values are passed as environment variables

    assert fill({"role": "decode", "command": "echo ${who}"}, scope) == {
        "role": "decode",
        "command": 'echo "${PDCTL_VAR_who}"',
        "env": {"PDCTL_VAR_who": "ops team"},
    }
    with pytest.raises(VarError, match="has no 'portt'"):
        substitute("${roles.decode.0.portt}", scope)
    with pytest.raises(VarError, match="0..0"):
        substitute("${roles.decode.3.port}", scope)


def test_cli_vars_parse_as_yaml_and_refuse_apply():
    assert parse_cli_vars(["a=1", "b=true", "c=x y", "d="]) == {"a": 1, "b": True, "c": "x y", "d": ""}
    with pytest.raises(ValueError, match="--apply"):
        parse_cli_vars(["apply=true"])
    with pytest.raises(ValueError):
        parse_cli_vars(["1bad=2"])


def test_shipped_playbooks_are_found_by_name_and_plan():
    found = shipped_playbooks()
    for name in SHIPPED:
        assert name in found, found
        pb = load_playbook(resolve_playbook(name))
        assert pb.name == name
        p = runner.plan(pb, embedded_default(), cli_vars={"storm_requests": 4} if "storm_requests" in pb.vars else {})
        assert p.sequence


def test_a_var_the_playbook_neither_declares_nor_uses_is_refused():
    """`--var storm_request=4` (misspelt) was accepted, and the seed's full 90 x 20k storm would have run."""
    pb = load_playbook(resolve_playbook("abort-storm-ab"))
    with pytest.raises(PlaybookError, match=r"--var storm_request: not a variable of this playbook .*storm_requests"):
        runner.plan(pb, embedded_default(), cli_vars={"storm_request": 4})
    assert runner.plan(pb, embedded_default(), cli_vars={"storm_requests": 4}).sequence


@pytest.mark.parametrize(
    "var, field, word",
    [
        ("storm_requests=abc", "requests", "'abc' is not a whole number"),
        ("storm_requests=3.5", "requests", "3.5 is not a whole number"),
        ("storm_requests=true", "requests", "true is not a whole number"),  # not Python's True
        ("storm_requests=1:30", "requests", "'1:30' is not a whole number"),  # YAML read 90
        ("storm_requests=0x10", "requests", "'0x10' is not a whole number"),  # YAML read 16
        ("storm_requests=2024-01-01", "requests", "'2024-01-01' is not a whole number"),  # YAML read a date
        ("storm_requests=-1", "requests", "requests must be 1..2000"),  # not `pdctl storm`'s --requests
        ("storm_watch_s=-1", "watch_s", "watch_s must be in (0, 3600]"),  # not blamed on sample_every_s
        ("storm_target=true", "target", "true is not a string"),
    ],
)
def test_a_storm_var_that_does_not_fit_names_its_arg_and_var(var, field, word):
    """`--var storm_requests=abc` said "'<=' not supported between instances of 'int' and 'str'"; other values
    were read as YAML 1.1 reads them, or blamed on another option by its CLI name."""
    pb = load_playbook(resolve_playbook("abort-storm-ab"))
    with pytest.raises(PlaybookError) as ei:
        runner.plan(pb, embedded_default(), cli_vars=parse_cli_vars([var]))
    name = var.split("=")[0]
    assert f"field 'args.{field}': {word} (set by ${{{name}}})" in ei.value.message, ei.value.message
    assert "not supported" not in ei.value.message and ei.value.exit_code == 2


def test_a_secret_var_that_does_not_fit_a_storm_arg_is_not_quoted():
    """The storm kind's own check quotes a value of the wrong kind; a --secret-var's must not reach the message."""
    pb = load_playbook(resolve_playbook("abort-storm-ab"))
    with pytest.raises(PlaybookError) as ei:
        runner.plan(
            pb,
            embedded_default(),
            cli_vars=parse_cli_vars(["storm_requests=hunter2abc"], secret=True),
            secret_vars={"storm_requests"},
        )
    assert "hunter2abc" not in ei.value.message and "is not a whole number" in ei.value.message, ei.value.message


def test_cli_var_values_are_read_as_an_operator_means_them():
    assert parse_cli_vars(["a=10", "b=1e3", "c=.5", "d=-2", "e=TRUE", "f=yes", "g=1:30", "h=0777", "i=nan"]) == {
        "a": 10,
        "b": 1000.0,
        "c": 0.5,
        "d": -2,
        "e": True,
        "f": "yes",
        "g": "1:30",
        "h": "0777",
        "i": "nan",
    }
    pb = load_playbook(resolve_playbook("abort-storm-ab"))  # 1e3 is a number: YAML 1.1 read it as text
    assert runner.plan(pb, embedded_default(), cli_vars=parse_cli_vars(["storm_requests=4", "storm_watch_s=1e3"]))


def test_stall_triage_fix_steps_run_only_with_apply():
    pb = load_playbook(resolve_playbook("stall-triage"))
    without = {s.spec.name: s.runs for s in runner.plan(pb, embedded_default()).steps}
    with_apply = {s.spec.name: s.runs for s in runner.plan(pb, embedded_default(), apply=True).steps}
    assert without == {"triage": True, "co-restart": False, "final-health": False}
    assert with_apply == {"triage": True, "co-restart": True, "final-health": True}


def test_shipped_playbooks_dry_run_through_cli(tmp_path, monkeypatch):
    for name in SHIPPED:
        r = _invoke(["run", name, "--dry-run", "--json"], tmp_path, monkeypatch)
        assert r.exit_code == 0, r.output
        import json

        doc = json.loads(r.stdout)
        assert doc["dry_run"] is True and doc["playbook"] == name


# -- validation messages never echo a secret (issue 9, item 4) --------------------------------------------------------

SECRET = "hf_INVSECRET_9876"


def _secret_inventory(tmp_path):
    inv = {
        "name": "sec",
        "roles": {
            "prefill": [{"port": 31000, "bootstrap_port": 9000}],
            "decode": [
                {"port": 31002, "env": {"HF_TOKEN": SECRET}, "args": {"--api-key": ["--listkey1", "lk2secret"]}}
            ],
            "router": [{"port": 31001}],
        },
    }
    return _write(tmp_path, inv, "inv.yaml")


def test_cli_run_masks_the_inventorys_secrets_in_a_malformed_playbook(tmp_path, monkeypatch):
    # `command:` written outside `args:` is an unknown field whose value the message shows (scrubbed)
    p = _write(
        tmp_path,
        {
            "name": "t",
            "steps": [
                {"name": "lit", "action": "shell", "role": "decode", "command": f"echo {SECRET} lk2secret --listkey1"}
            ],
        },
    )
    r = _invoke(["run", str(p), "--dry-run", "-i", str(_secret_inventory(tmp_path))], tmp_path, monkeypatch)
    assert r.exit_code == 2, r.output
    assert "step 1 'lit', field 'command': unknown field (got 'echo *** *** ***')" in r.output
    assert SECRET not in r.output and "lk2secret" not in r.output and "listkey1" not in r.output


def test_a_secret_looking_field_is_never_echoed_even_without_an_inventory():
    msg = _err(
        {
            "name": "t",
            "api_token": "tok-12345678",
            "steps": [
                {
                    "name": "s",
                    "action": "wait",
                    "args": {"seconds": 1},
                    "hf_token": 87654321,
                    "env": "HF_TOKEN=abcdefgh x",
                }
            ],
        }
    )
    assert "field 'api_token': unknown field (got ***)" in msg and "field 'hf_token': unknown field (got ***)" in msg
    assert "tok-12345678" not in msg and "87654321" not in msg and "abcdefgh" not in msg
    assert "field 'env': unknown field (got 'HF_TOKEN=*** x')" in msg


def test_declared_secrets_are_scrubbed_from_the_cross_step_checks_too():
    with pytest.raises(PlaybookError) as ei:
        parse_playbook(
            {"name": "t", "steps": [{"name": "s", "action": "wait", "args": {"seconds": 1}, "when": f"{SECRET} or x"}]},
            "pb.yaml",
            frozenset({SECRET}),
        )
    assert "field 'when'" in ei.value.message and SECRET not in ei.value.message


def test_arg_values_checked_with_values_mask_declared_secrets_and_secret_named_fields():
    from pdctl.playbook.kinds import REGISTRY
    from pdctl.playbook.steps import check_args

    bad = dict(
        check_args(
            REGISTRY["shell"],
            {"role": f"decode-{SECRET}", "command": "true", "env": {"API_KEY": 12345678}},
            with_values=True,
            secrets=frozenset({SECRET}),
        )
    )
    assert "args.role" in bad and "(got 'decode-***')" in bad["args.role"], bad
    assert bad["args.env.API_KEY"].endswith("(got ***)"), bad
    assert SECRET not in str(bad) and "12345678" not in str(bad)


# -- a playbook path that is a FIFO or a device: the reader's words, not "no such file" (issue 9, item 5) -------------


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_playbook_path_that_is_no_regular_file_says_what_it_is(tmp_path, monkeypatch, kind):
    import os

    if kind == "fifo":
        path = tmp_path / "pb.yaml"
        os.mkfifo(path)  # nobody writes to it: opening it would block forever
        what = "is a FIFO (named pipe), not a regular file"
    elif kind == "device":
        path, what = "/dev/zero", "is a device, not a regular file"
    else:
        path, what = tmp_path, "is a directory, not a regular file"
    assert str(resolve_playbook(str(path))) == str(path)
    r = _invoke(["run", str(path), "--dry-run"], tmp_path, monkeypatch)
    assert r.exit_code == 2, r.output
    assert f"{path}: {what}" in r.output and "no such" not in r.output
    monkeypatch.chdir(tmp_path)  # a bare name that exists but is no file
    if kind == "fifo":
        r = _invoke(["run", "pb.yaml", "--dry-run"], tmp_path, monkeypatch)
        assert r.exit_code == 2 and f"pb.yaml: {what}" in r.output, r.output
