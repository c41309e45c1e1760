"""to_data: the one serialiser of typed results."""

from dataclasses import dataclass, field
from enum import Enum

from pdctl.serialize import JSON_OFF, to_data


class Colour(str, Enum):
    RED = "red"


@dataclass
class Inner:
    colour: Colour
    hidden: object = field(default=None, metadata=JSON_OFF)


@dataclass
class Outer:
    name: str
    inner: list[Inner]
    by_key: dict
    json_extra = ("shout",)

    @property
    def shout(self) -> str:
        return self.name.upper()


def test_dataclasses_enums_nested_and_extras():
    o = Outer("a", [Inner(Colour.RED, hidden=object())], {1: (Colour.RED, 2.5), "e": ValueError("bad\nmore")})
    assert to_data(o) == {
        "name": "a",
        "inner": [{"colour": "red"}],
        "by_key": {"1": ["red", 2.5], "e": "bad"},
        "shout": "A",
    }


def test_msgspec_models_sets_and_unknown_values():
    import msgspec

    class M(msgspec.Struct):
        x: int = 1

    assert to_data({"m": M(), "o": {3}}) == {"m": {"x": 1}, "o": [3]}
    assert isinstance(to_data(object()), str)
