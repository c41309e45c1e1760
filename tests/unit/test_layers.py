"""The one list of final-health layers."""

import pytest

from pdctl.checks.layers import DEFAULT_LAYERS, LAYER_NAMES, OPTIONAL_LAYERS, in_order, layer_title, parse_layer_names


def test_default_layers_leave_out_the_optional_sampled_one():
    assert DEFAULT_LAYERS == ("health", "e2e", "transfer", "flags", "lineage")
    assert OPTIONAL_LAYERS == ("inflight", "pairs", "outputs")
    assert LAYER_NAMES == DEFAULT_LAYERS + OPTIONAL_LAYERS


def test_titles_are_numbered_in_order():
    assert layer_title("health") == "1. component health"
    assert layer_title("inflight") == "6. inflight queues"
    assert layer_title("pairs") == "7. prefill x decode pair canaries"
    assert layer_title("custom") == "custom"


@pytest.mark.parametrize(
    "given,want",
    [
        (None, DEFAULT_LAYERS),
        (["e2e"], ("e2e",)),
        (["health,e2e", "inflight"], ("health", "e2e", "inflight")),
        ([" flags , "], ("flags",)),
    ],
)
def test_parse_layer_names(given, want):
    assert parse_layer_names(given) == want


@pytest.mark.parametrize("given,msg", [([","], "no layer named"), (["health,wedge"], "'wedge': unknown layer")])
def test_parse_layer_names_refuses(given, msg):
    with pytest.raises(ValueError, match=msg):
        parse_layer_names(given)


def test_in_order():
    assert in_order(["inflight", "x", "health"]) == ["health", "inflight", "x"]
