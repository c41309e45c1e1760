"""RoleRef, the typed (role, index) of one role instance: it is the pair it replaced (so keys built either way meet),
and what every parallel loop over the instances hands back as its key."""

from __future__ import annotations

import json

from pdctl.inventory import parse_inventory
from pdctl.ops.context import Deployment
from pdctl.role_ref import RoleRef
from pdctl.serialize import to_data


def test_a_role_ref_is_the_pair_it_replaced():
    ref = RoleRef("decode", 1)
    role, number = ref
    assert (role, number) == ("decode", 1) and ref == ("decode", 1) and ref.short == "decode[1]"
    assert {ref: "x"}[("decode", 1)] == "x"  # a dict keyed by RoleRef answers a plain pair, and back
    assert json.dumps(to_data({"w": ref})) == '{"w": ["decode", 1]}'


def test_each_instance_keys_are_role_refs_in_inventory_order(tmp_path):
    data = {
        "name": "t",
        "hosts": {"local": {"transport": "local"}},
        "roles": {
            "prefill": [{"host": "local", "port": 30000, "bootstrap_port": 8998}],
            "decode": [{"host": "local", "port": 30002}, {"host": "local", "port": 30003}],
            "router": [{"host": "local", "port": 30001}],
        },
    }
    with Deployment(parse_inventory(data, "inv.yaml")) as dep:
        got = dep.each_instance(lambda role, i: f"{role}{i}")
    assert all(isinstance(r.key, RoleRef) for r in got)
    assert [r.key for r in got] == [
        RoleRef("prefill", 0),
        RoleRef("decode", 0),
        RoleRef("decode", 1),
        RoleRef("router", 0),
    ]
    assert [r.value for r in got] == ["prefill0", "decode0", "decode1", "router0"]
