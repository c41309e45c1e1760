"""Issue 28, C7: a systemd host's `workdir` holding a newline was refused by render with a hint to declare
`hosts.X.python`. The inventory now refuses it at load, naming `hosts.<name>.workdir` and the reason (through the
real CLI: exit 2, one JSON document); a unit rendered from a spec made elsewhere (the watch's cwd) says `workdir`."""

from __future__ import annotations

import json
import re

import pytest

from pdctl.errors import InventoryError
from pdctl.inventory import embedded_default, parse_inventory, load_inventory
from pdctl.services.base import ServiceSpec
from pdctl.services.systemd import render_unit
from tests.e2e.helpers import pdctl, write_inventory


def _with_host(**fields) -> dict:
    data = embedded_default().dump()
    data["hosts"]["local"].update(fields)
    return data


def test_a_systemd_workdir_with_a_newline_names_the_field_and_the_reason(tmp_path):
    (tmp_path / "state").mkdir()
    inv = write_inventory(tmp_path / "inv.yaml", _with_host(service_manager="systemd", workdir="/tmp/a\nb"))
    run = pdctl(["render", "-i", str(inv), "--json"], state=tmp_path / "state", timeout=60)
    assert run.code == 2, run.output
    err = json.loads(run.stdout)["error"]
    assert "hosts.local.workdir: contains a newline ('/tmp/a\\nb')" in err["message"]
    assert "WorkingDirectory=" in err["message"] and "python" not in err["message"] + str(err["hint"])


def test_a_yaml_block_scalars_trailing_newline_is_refused_on_any_manager(tmp_path):
    path = tmp_path / "inv.yaml"
    write_inventory(path, embedded_default().dump())
    text = path.read_text().replace("    workdir: null\n", "    workdir: |\n      /opt/pd\n", 1)
    assert "workdir: |" in text
    path.write_text(text)
    with pytest.raises(InventoryError, match=r"hosts\.local\.workdir: contains a newline \('/opt/pd\\n'\)"):
        load_inventory(str(path))


@pytest.mark.parametrize("workdir, words", [("/tmp/a\tb", "control character '\\t'"), ("opt/pd", "absolute path")])
def test_other_unusable_systemd_workdirs_are_refused_naming_the_field(workdir, words):
    with pytest.raises(InventoryError) as e:
        parse_inventory(_with_host(service_manager="systemd", workdir=workdir), "inv.yaml")
    assert "hosts.local.workdir: " in str(e.value) and words in str(e.value)


def test_a_relative_workdir_stays_allowed_for_pidfile_hosts():
    assert parse_inventory(_with_host(workdir="checkout"), "inv.yaml").hosts["local"].workdir == "checkout"


@pytest.mark.parametrize("workdir, words", [("/srv/a\nb", "contains a newline"), ("srv", "is not an absolute path")])
def test_a_unit_from_a_spec_made_elsewhere_names_the_workdir(workdir, words):
    spec = ServiceSpec("pdctl-watch", ("/usr/bin/python3", "-m", "pdctl", "watch"), workdir=workdir)
    with pytest.raises(ValueError, match=re.escape(f"workdir {workdir!r} {words}")):
        render_unit(spec)
