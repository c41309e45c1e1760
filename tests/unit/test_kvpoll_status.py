"""Property tests of the room status update rule over interleavings of writes."""

from hypothesis import given, settings, strategies as st

from engine.disaggregation.kvpoll import KVPoll, TERMINAL, reduce_min
from engine.disaggregation.status import StatusTable, next_status

writes = st.lists(st.sampled_from(list(KVPoll)), min_size=1, max_size=30)


def _run(seq, sticky):
    cur, trace = None, []
    for w in seq:
        cur = next_status(cur, w, sticky)
        trace.append(cur)
    return trace


@given(writes)
@settings(max_examples=500)
def test_fixed_rule_terminal_states_never_leave(seq):
    trace = _run(seq, sticky=True)
    for i, s in enumerate(trace):
        if s in TERMINAL:
            # Failed may still be written over Success (an abort), but nothing non-terminal follows.
            assert all(t in TERMINAL for t in trace[i:])
            if s == KVPoll.Failed:
                assert all(t == KVPoll.Failed for t in trace[i:])


@given(writes, writes)
def test_fixed_rule_interleaving_of_two_writers(a, b):
    """Abort thread and transfer worker interleaved in any order: once Failed, stays Failed."""
    merged = [x for pair in zip(a, b) for x in pair] + a[len(b) :] + b[len(a) :]
    trace = _run([KVPoll.Bootstrapping] + merged, sticky=True)
    if KVPoll.Failed in trace:
        assert trace[-1] == KVPoll.Failed


def test_prefix_rule_lets_failed_become_transferring():
    """The drill's pre-fix rule: the seed's race is reachable (so the property above can fail)."""
    trace = _run([KVPoll.WaitingForInput, KVPoll.Failed, KVPoll.Transferring], sticky=False)
    assert trace == [KVPoll.WaitingForInput, KVPoll.Failed, KVPoll.Transferring]


@given(writes)
def test_prefix_rule_is_max_except_failed(seq):
    trace = _run([KVPoll.Bootstrapping] + seq, sticky=False)
    prev = KVPoll.Bootstrapping
    for w, s in zip(seq, trace[1:]):
        assert s == (KVPoll.Failed if w == KVPoll.Failed else KVPoll(max(prev, w)))
        prev = s


def test_unknown_room_ignores_failed_and_table_clear():
    t = StatusTable()
    assert t.update(7, KVPoll.Failed) is None and t.get(7) is None
    t.update(7, KVPoll.Transferring)
    t.update(7, KVPoll.Failed)
    t.update(7, KVPoll.Transferring)
    assert t.get(7) == KVPoll.Failed
    t.clear(7)
    assert t.get(7) is None


def test_kvpoll_values_and_min_reduce():
    assert [int(k) for k in KVPoll] == [0, 1, 2, 3, 4]
    assert reduce_min([KVPoll.Success, KVPoll.Failed, KVPoll.Transferring]) == KVPoll.Failed
