"""The router address an operator names (`pdctl storm --router`, a playbook storm step's `router`) is checked part
by part: a bad port (out of range, negative, a second ':') is exit 2 naming --router or the step's field and the bad
part, before any host is contacted or any step runs; never an "unexpected ValueError"."""

from __future__ import annotations

import json

import pytest
import yaml

from pdctl.checks.router_address import RouterAddress, parse_router_address
from tests.e2e.helpers import local_inventory, pdctl, write_inventory
from tests.fixtures.net import closed_port


@pytest.mark.parametrize(
    "text, want",
    [
        ("127.0.0.1:30001", RouterAddress("127.0.0.1", 30001)),
        ("http://localhost:1/", RouterAddress("localhost", 1)),
        ("[::1]:65535", RouterAddress("::1", 65535)),
        ("router[0]@gpu1:30001", RouterAddress("gpu1", 30001)),
    ],
)
def test_good_addresses_parse(text, want):
    assert parse_router_address(text) == want


@pytest.mark.parametrize(
    "text, says",
    [
        ("127.0.0.1:99999", "port 99999 is out of range 1-65535"),
        ("127.0.0.1:0", "port 0 is out of range"),
        ("127.0.0.1:-1", "port '-1' is not a number"),
        ("127.0.0.1:41003:1", "more than one ':'"),
        ("127.0.0.1", "no port"),
        (":30001", "no host"),
        ("https://h:1", "scheme 'https'"),
        ("h:1/x", "no path"),
        ("router[0]@gpu1:70000", "port 70000 is out of range"),
        (30001, "as text"),
    ],
)
def test_bad_addresses_say_which_part_is_wrong(text, says):
    with pytest.raises(ValueError) as e:
        parse_router_address(text)
    assert says in str(e.value)


def _inventory(tmp_path):
    ports = {k: closed_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    return write_inventory(tmp_path / "inv.yaml", local_inventory("rt", ports))


@pytest.mark.parametrize(
    "bad, part",
    [
        ("127.0.0.1:99999", "port 99999 is out of range 1-65535"),
        ("127.0.0.1:-1", "port '-1' is not a number 1-65535"),
        ("127.0.0.1:41003:1", "more than one ':'"),
    ],
)
def test_storm_with_a_malformed_router_exits_2_naming_it(tmp_path, bad, part):
    inv = _inventory(tmp_path)
    r = pdctl(["storm", "-i", str(inv), f"--router={bad}"], state=tmp_path)
    assert r.code == 2, r.output
    assert f"--router '{bad}': {part}" in r.stderr
    assert "unexpected" not in r.output and "Traceback" not in r.output
    r = pdctl(["storm", "-i", str(inv), f"--router={bad}", "--json"], state=tmp_path)
    doc = json.loads(r.stdout)
    assert r.code == 2 and doc["error"]["kind"] == "usage" and part in doc["error"]["message"]


def test_playbook_storm_step_with_a_malformed_router_is_refused_before_anything_runs(tmp_path):
    inv = _inventory(tmp_path)
    pb = tmp_path / "pb.yaml"
    pb.write_text(
        yaml.safe_dump(
            {"name": "x", "steps": [{"name": "a", "action": "storm", "args": {"router": "127.0.0.1:99999"}}]}
        )
    )
    r = pdctl(["run", str(pb), "-i", str(inv)], state=tmp_path)
    assert r.code == 2, r.output
    assert "step 1 'a', field 'args.router': '127.0.0.1:99999': port 99999 is out of range 1-65535" in r.stderr
    assert "unexpected" not in r.output and "Traceback" not in r.output
    assert not (tmp_path / "pdctl" / "audit.jsonl").exists()  # nothing run, nothing recorded
