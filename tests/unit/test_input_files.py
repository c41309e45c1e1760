"""Every operator file (inventory, playbook) is read safely: only a regular file of at most 1 MiB of UTF-8 text,
no key given twice; anything else is a UsageError (exit 2) naming the file -- never a hang, never an unmapped error.
Real files, a real FIFO, the real /dev/zero."""

from __future__ import annotations

import os
import threading

import pytest

from pdctl.errors import InventoryError, PlaybookError
from pdctl.inventory import load_inventory
from pdctl.yamlfile import MAX_INPUT_BYTES, load_yaml

GOOD = "roles:\n  prefill: [{port: 30000}]\n  decode: [{port: 30002}]\n  router: [{port: 30001}]\n"


def _load_bounded(path, error=InventoryError, what="inventory", limit=5.0):
    """load_yaml in a thread, so that a read that blocks fails the test instead of hanging the suite."""
    box: dict = {}

    def run():
        try:
            box["value"] = load_yaml(path, error, what)
        except BaseException as e:  # noqa: BLE001 -- handed to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(limit)
    assert not t.is_alive(), f"reading {path} blocked for over {limit}s"
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_latin1_inventory_names_the_file_and_the_byte_offset(tmp_path):
    p = tmp_path / "inv.yaml"
    p.write_bytes(GOOD.encode() + "name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(InventoryError) as e:
        load_inventory(p)
    assert e.value.exit_code == 2
    assert str(p) in e.value.message and "not UTF-8" in e.value.message
    assert f"byte offset {len(GOOD) + 9}" in e.value.message and "0xe9" in e.value.message


def test_binary_playbook_is_refused_naming_it(tmp_path):
    p = tmp_path / "pb.yaml"
    p.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00\xff\xfe")
    with pytest.raises(PlaybookError) as e:
        load_yaml(p, PlaybookError, "playbook")
    assert e.value.exit_code == 2 and str(p) in e.value.message and "UTF-8" in e.value.message


def test_nul_bytes_in_utf8_text_are_not_a_text_file(tmp_path):
    p = tmp_path / "inv.yaml"
    p.write_bytes(b"name: a\x00b\n")
    with pytest.raises(InventoryError) as e:
        load_inventory(p)
    assert str(p) in e.value.message and "not a text file" in e.value.message


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "inv.yaml"
    os.mkfifo(fifo)  # nobody writes to it: opening it for reading would block forever
    with pytest.raises(InventoryError) as e:
        _load_bounded(fifo)
    assert str(fifo) in e.value.message and "FIFO" in e.value.message


def test_symlink_to_a_fifo_is_refused_too(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "inv.yaml"
    link.symlink_to(fifo)
    with pytest.raises(InventoryError) as e:
        _load_bounded(link)
    assert str(link) in e.value.message and "FIFO" in e.value.message


def test_dev_zero_is_refused_as_a_device():
    with pytest.raises(InventoryError) as e:
        _load_bounded("/dev/zero")
    assert "/dev/zero" in e.value.message and "device" in e.value.message


def test_directory_is_refused(tmp_path):
    with pytest.raises(InventoryError) as e:
        _load_bounded(tmp_path)
    assert str(tmp_path) in e.value.message and "directory" in e.value.message


def test_file_over_the_size_cap_is_refused_saying_the_cap(tmp_path):
    p = tmp_path / "inv.yaml"
    p.write_text(GOOD + "#" * MAX_INPUT_BYTES + "\n")
    with pytest.raises(InventoryError) as e:
        _load_bounded(p)
    assert str(p) in e.value.message and "1 MiB" in e.value.message
    p.write_text(GOOD + "#" * (MAX_INPUT_BYTES - len(GOOD) - 10) + "\n")  # just under the cap still loads
    assert load_inventory(p).roles.decode[0].port == 30002


def test_duplicate_top_level_key_names_the_key_and_both_lines(tmp_path):
    p = tmp_path / "inv.yaml"
    p.write_text("name: first\n" + GOOD + "name: second\n")
    with pytest.raises(InventoryError) as e:
        load_inventory(p)
    msg = e.value.message
    assert str(p) in msg and "duplicate key 'name'" in msg
    assert "line 6" in msg and "first given at line 1" in msg


def test_duplicate_nested_key_is_refused(tmp_path):
    p = tmp_path / "inv.yaml"
    p.write_text(
        "roles:\n  prefill: [{port: 30000, port: 30005}]\n  decode: [{port: 30002}]\n  router: [{port: 30001}]\n"
    )
    with pytest.raises(InventoryError) as e:
        load_inventory(p)
    assert "duplicate key 'port'" in e.value.message and "line 2" in e.value.message


def test_merge_key_override_is_not_a_duplicate(tmp_path):
    p = tmp_path / "inv.yaml"
    p.write_text("base: &b {port: 30000, ready_timeout: 5}\n")
    assert load_yaml(p, InventoryError, "inventory") == {"base": {"port": 30000, "ready_timeout": 5}}
    p.write_text("a: &b {port: 1, x: 2}\nb: {<<: *b, port: 3}\n")
    assert load_yaml(p, InventoryError, "inventory")["b"] == {"port": 3, "x": 2}


def test_keys_that_python_would_merge_are_a_duplicate_too(tmp_path):
    p = tmp_path / "f.yaml"
    p.write_text("'1': text\n1: a\ntrue: b\n")  # 1 and true are one dict key: one value would be lost
    with pytest.raises(InventoryError) as e:
        load_yaml(p, InventoryError, "inventory")
    assert "duplicate key True" in e.value.message and "line 3" in e.value.message


def test_unreadable_file_names_the_cause(tmp_path):
    # a symlink loop cannot be read even by root (permission bits can: the tests run as root)
    p = tmp_path / "inv.yaml"
    p.symlink_to(tmp_path / "loop.yaml")
    (tmp_path / "loop.yaml").symlink_to(p)
    with pytest.raises(InventoryError) as e:
        load_inventory(p)
    assert str(p) in e.value.message and "symbolic links" in e.value.message, e.value.message


def test_deeply_nested_yaml_is_a_usage_error_not_a_recursion_error(tmp_path):
    p = tmp_path / "inv.yaml"
    p.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(InventoryError) as e:
        load_inventory(p)
    assert str(p) in e.value.message and "nested too deeply" in e.value.message


def test_inventory_validation_never_echoes_a_secret_looking_fields_value(tmp_path):
    p = tmp_path / "inv.yaml"
    p.write_text(
        GOOD.replace("{port: 30002}", "{port: 30002, hf_token: hf_LEAK_12345678, api_key: 87654321}")
        + "hosts:\n  local: {transport: local, auth: 'HF_TOKEN=abcdefgh'}\n"
    )
    with pytest.raises(InventoryError) as e:
        load_inventory(p)
    msg = e.value.message
    assert "roles.decode.0.hf_token: unknown field (got ***)" in msg
    assert "roles.decode.0.api_key: unknown field (got ***)" in msg and "hosts.local.auth: unknown field" in msg
    assert "hf_LEAK" not in msg and "87654321" not in msg and "abcdefgh" not in msg
