"""The watch follows its inventory file (issue 27): a changed file is judged against from the next flags round,
with what changed; a file that breaks, vanishes or names another deployment is not followed, said once."""

from __future__ import annotations

import os

import yaml

from pdctl.ops.watch_follow import Declared, InventoryFollower, what_changed
from pdctl.inventory import load_inventory

BASE = {
    "name": "follow",
    "hosts": {"local": {"transport": "local", "service_manager": "pidfile"}},
    "roles": {
        "prefill": [{"host": "local", "port": 31000, "bootstrap_port": 31001}],
        "decode": [{"host": "local", "port": 31002}],
        "router": [{"host": "local", "port": 31003}],
    },
}


def _write(path, data) -> None:
    path.write_text(yaml.safe_dump(data))
    st = os.stat(path)  # a later mtime, whatever the filesystem's clock granularity
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_a_changed_inventory_is_followed_with_what_changed(tmp_path):
    path = tmp_path / "inv.yaml"
    _write(path, BASE)
    f = InventoryFollower.of(load_inventory(path))
    assert f.look() is None
    changed = {
        **BASE,
        "roles": {**BASE["roles"], "decode": [{"host": "local", "port": 31002, "args": {"--max-running-requests": 8}}]},
    }
    _write(path, changed)
    got = f.look()
    assert isinstance(got, Declared) and got.changed == ["roles.decode[0]"]
    assert got.inv.roles.decode[0].args == {"--max-running-requests": 8}
    assert f.look() is None  # followed once
    path.write_text(path.read_text())  # the same bytes written again: nothing to follow
    os.utime(path, ns=(0, os.stat(path).st_mtime_ns + 2_000_000_000))
    assert f.look() is None


def test_a_broken_vanished_or_foreign_file_is_not_followed_and_said_once(tmp_path):
    path = tmp_path / "inv.yaml"
    _write(path, BASE)
    f = InventoryFollower.of(load_inventory(path))
    _write(path, {**BASE, "roles": {"prefill": []}})
    why = f.look()
    assert isinstance(why, str) and str(path) in why and "still judging against the inventory loaded before" in why
    assert f.look() is None  # said once
    _write(path, {**BASE, "name": "other"})
    why = f.look()
    assert isinstance(why, str) and "'other'" in why and "not followed" in why
    path.unlink()
    why = f.look()
    assert isinstance(why, str) and "cannot be read" in why
    assert f.look() is None
    assert f.inv.name == "follow"


def test_the_embedded_default_is_never_looked_at_again():
    f = InventoryFollower.of(load_inventory(None))
    assert f.path is None and f.look() is None


def test_what_changed_names_sections_and_instances():
    a = load_inventory(None)
    data = {
        "name": "local",
        "hosts": {"local": {"transport": "local", "service_manager": "pidfile"}},
        "watch": {"pairs_every": 7},
        "roles": BASE["roles"],
    }
    from pdctl.inventory import parse_inventory

    b = parse_inventory(data, "x")
    got = what_changed(a, b)
    assert "watch" in got and "roles.prefill[0]" in got and "roles.router[0]" in got
