"""The scheduler's events (engine/events.py): typed, and they cross the scheduler pipe as they are."""

from __future__ import annotations

import pickle

import pytest

from engine.events import Done, Failed, Tokens, ends


@pytest.mark.parametrize(
    "ev",
    [
        Tokens([5, 6], [None, (-0.5, [(5, -0.5)])], {"type": "length", "length": 2}),
        Done({"type": "stop"}),
        Failed(500, "x"),
    ],
)
def test_events_cross_the_pipe_unchanged(ev):
    assert pickle.loads(pickle.dumps(ev)) == ev


def test_only_done_and_failed_end_a_request():
    assert not ends(Tokens([1], [None], {"type": "length"}))  # the reason rides it; its Done still follows
    assert ends(Done({})) and ends(Failed(499, "gone"))
