"""msgspec's validation errors in an operator's words (pdctl/struct_errors.py), on small models of their own."""

from __future__ import annotations

from typing import Annotated, Optional

import msgspec
import pytest

from pdctl.struct_errors import field_error, validation_problems


class Leaf(msgspec.Struct, forbid_unknown_fields=True):
    port: Annotated[int, msgspec.Meta(ge=1, le=65535)] = 22
    token: Optional[str] = None

    def __post_init__(self) -> None:
        if self.port == 13:
            raise field_error("port", "13 is unlucky")


class Root(msgspec.Struct, forbid_unknown_fields=True):
    hosts: dict[str, Leaf] = msgspec.field(default_factory=dict)
    items: list[Leaf] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        if "forbidden" in self.hosts:
            raise field_error("hosts.forbidden", "this name is taken")


def problems(data) -> list[str]:
    with pytest.raises(msgspec.ValidationError) as e:
        msgspec.convert(data, Root, strict=False)
    return validation_problems(e.value, data, Root)


def test_a_dict_key_is_named_where_msgspec_prints_dots():
    assert problems({"hosts": {"a": {}, "gpu1": {"port": 70000}}}) == [
        "hosts.gpu1.port: Expected int <= 65535 (got 70000)"
    ]


def test_a_list_index_and_a_models_own_check_name_the_field():
    assert problems({"items": [{}, {"port": 13}]}) == ["items.1.port: 13 is unlucky"]
    assert problems({"hosts": {"forbidden": {}}}) == ["hosts.forbidden: this name is taken"]


def test_every_unknown_field_is_listed_and_the_first_other_problem_after_them():
    # msgspec reads keys in the order given and stops at the first problem: the unknown ones are dropped and read again
    assert problems({"extra": 1, "hosts": {"a": {"prot": 1, "potr": 2}}, "items": [{"port": 0}], "late": 2}) == [
        "extra: unknown field (got 1)",
        "hosts.a.prot: unknown field (got 1)",
        "hosts.a.potr: unknown field (got 2)",
        "items.0.port: Expected int >= 1 (got 0)",
    ]


def test_a_missing_field_and_a_secret_looking_value():
    class Need(msgspec.Struct):
        name: str

    with pytest.raises(msgspec.ValidationError) as e:
        msgspec.convert({}, Need)
    assert validation_problems(e.value, {}, Need) == ["name: required field is missing"]
    shown = problems({"hosts": {"a": {"token": 12345678}}})
    assert shown == ["hosts.a.token: Expected str | null, got int (got ***)"] and "12345678" not in shown[0]
