"""The values a TAB completes (pdctl/cli/complete_values.py), source by source: roles and instances and pairs from
a real inventory file (or the embedded default), layers from the layer list (a comma list continued), heal modes,
storm targets, playbooks shipped and on disk. Pure functions over real files; the shell protocol end to end is
tests/unit/test_completion_protocol.py."""

from __future__ import annotations

import pytest

from pdctl.checks.layers import LAYERS
from pdctl.cli import complete_values as cv
from pdctl.ops.storm_plan import TARGETS
from pdctl.playbook.schema import shipped_playbooks

TWO_DECODES = """\
name: two
hosts:
  gpu-1: {address: 10.0.0.1}
  gpu-2: {address: 10.0.0.2}
roles:
  prefill: [{host: gpu-1, port: 30000, bootstrap_port: 8998, listen_host: 0.0.0.0}]
  decode: [{host: gpu-1, port: 30002, listen_host: 0.0.0.0}, {host: gpu-2, port: 30002, listen_host: 0.0.0.0}]
  router: [{host: gpu-1, port: 30001}]
"""


def values(cands):
    return [v for v, _ in cands]


@pytest.fixture
def two_decodes(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text(TWO_DECODES)
    return str(path)


def test_an_inventory_with_two_decodes_completes_each_instance(two_decodes):
    got = cv.role_instances(two_decodes)
    assert values(got) == ["prefill", "prefill[0]", "decode", "decode[0]", "decode[1]", "router", "router[0]"]
    assert dict(got)["decode[1]"] == "gpu-2:30002"  # what it is: its host and port
    assert dict(got)["decode"] == "every decode (2)"


def test_the_embedded_default_when_no_inventory_is_given():
    assert values(cv.role_instances(None)) == ["prefill", "prefill[0]", "decode", "decode[0]", "router", "router[0]"]
    assert values(cv.pair_refs(None)) == ["0,0"]


def test_an_inventory_that_does_not_load_completes_the_role_names_only(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("roles: [not, a, mapping]\n")
    assert values(cv.role_instances(str(bad))) == ["prefill", "decode", "router"]
    assert values(cv.role_instances(str(tmp_path / "missing.yaml"))) == ["prefill", "decode", "router"]
    assert cv.pair_refs(str(bad)) == [] and cv.instance_numbers(str(bad), "decode") == []


def test_a_tilde_path_is_read_as_the_shell_would_expand_it(two_decodes, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert "decode[1]" in values(cv.role_instances("~/two.yaml"))


def test_role_names_say_how_many_instances_an_inventory_has(two_decodes):
    assert values(cv.role_names(None)) == ["prefill", "decode", "router"]
    assert dict(cv.role_names(two_decodes))["decode"] == "role: 2 in two"


def test_pairs_and_instance_numbers(two_decodes):
    assert cv.pair_refs(two_decodes) == [("0,0", "prefill[0] -> decode[0]"), ("0,1", "prefill[0] -> decode[1]")]
    assert values(cv.instance_numbers(two_decodes, "decode")) == ["0", "1"]
    assert values(cv.instance_numbers(two_decodes, "router")) == ["0"]
    assert cv.instance_numbers(two_decodes, None) == [] and cv.instance_numbers(two_decodes, "nosuch") == []


def test_pairs_complete_to_what_restart_takes(two_decodes):
    from pdctl.cli.restart import pair_indices

    assert [pair_indices(v) for v in values(cv.pair_refs(two_decodes))] == [(0, 0), (0, 1)]


def test_layers_every_one_then_a_comma_list_continued():
    assert values(cv.layer_names("")) == [x.name for x in LAYERS]
    after = values(cv.layer_names("health,e"))
    assert "health,e2e" in after and not any(v in ("health,health", "e2e") for v in after)
    assert all(v.startswith("health,") for v in after)
    # a layer named by an earlier --layer is not offered again
    assert "health" not in values(cv.layer_names("", given=["health,e2e"]))
    assert "flags" in values(cv.layer_names("", given=["health,e2e"]))


def test_heal_modes_and_storm_targets_are_what_the_commands_take():
    assert values(cv.heal_modes()) == ["off", "dry", "on"]
    assert values(cv.storm_targets()) == list(TARGETS)


def test_playbooks_shipped_by_name_and_yaml_files_where_typed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text("name: mine\n")
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / ".hidden.yaml").write_text("")
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "night.yml").write_text("")
    (tmp_path / "books" / "sub.yaml").mkdir()  # a directory, whatever its name, is no playbook
    here = values(cv.playbook_refs(""))
    assert here[: len(shipped_playbooks())] == list(shipped_playbooks())
    assert "final-health" in here and "mine.yaml" in here
    assert "notes.txt" not in here and ".hidden.yaml" not in here
    assert values(cv.playbook_refs("books/")) == ["books/night.yml"]  # only files there; no shipped names
    assert values(cv.playbook_refs(str(tmp_path) + "/books/n")) == [str(tmp_path) + "/books/night.yml"]
    assert cv.playbook_refs("nosuchdir/") == []
    assert ".hidden.yaml" in values(cv.playbook_refs(".h")) and "./mine.yaml" in values(cv.playbook_refs("./"))
    assert "./.hidden.yaml" not in values(cv.playbook_refs("./"))
