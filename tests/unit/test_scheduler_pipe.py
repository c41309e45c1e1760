"""The HTTP side of the engine's scheduler pipe (engine/scheduler_process.py), message by message: what it does
with events and replies that nobody waits for any more. The two real processes are tested in
tests/engine/test_engine_processes.py."""

from __future__ import annotations

import pytest

from engine.events import Done, Tokens
from engine.scheduler_process import SchedulerClient, WIRE_FIELDS


class _Sent:
    def __init__(self):
        self.msgs = []

    def send(self, msg):
        self.msgs.append(msg)


def _client():
    return SchedulerClient(-1, _Sent())


def test_events_reach_their_sink_in_order_and_the_sink_goes_with_the_last():
    from engine.req import Req

    c, got = _client(), []
    c.submit(Req(rid="a", input_ids=[1, 2], max_new_tokens=2, sink=got.append, stream=True))
    ((kind, key, fields),) = c.pipe.msgs
    assert kind == "req" and set(fields) == set(WIRE_FIELDS) and "sink" not in fields
    c._handle(("ev", key, [Tokens([5], [None])]), None)
    c._handle(("ev", key, [Tokens([6], [None], {"type": "length"}), Done({"type": "length"})]), None)
    assert got == [Tokens([5], [None]), Tokens([6], [None], {"type": "length"}), Done({"type": "length"})]
    assert c.sinks == {}
    c._handle(("ev", key, [Done({})]), None)  # late events of a finished request are dropped
    assert len(got) == 3


def test_a_reply_for_a_cancelled_call_is_dropped():
    c = _client()
    fut = c.call("metrics")
    fut.cancel()  # the handler that asked went away
    c._handle(("reply", c.pipe.msgs[0][1], b"x", None), None)
    assert c.calls == {}


def test_a_reply_with_an_error_fails_the_call():
    c = _client()
    fut = c.call("server_info")
    c._handle(("reply", c.pipe.msgs[0][1], None, "KeyError: 'x'"), None)
    with pytest.raises(RuntimeError, match="KeyError"):
        fut.result(0)


def test_a_sink_whose_loop_has_closed_does_not_stop_the_reader():
    from engine.req import Req

    c = _client()

    def closed(_ev):
        raise RuntimeError("Event loop is closed")

    c.submit(Req(rid="a", input_ids=[1], max_new_tokens=1, sink=closed))
    c._handle(("ev", c.pipe.msgs[0][1], [Done({})]), None)
    fut = c.call("num_active")
    c._handle(("reply", c.pipe.msgs[1][1], 0, None), None)
    assert fut.result(0) == 0
