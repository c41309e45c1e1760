"""fan_out, the one parallel loop: labelled results in the order given whatever finished first, at most `bound`
calls at once, a host that cannot be asked is that item's error (the others still answer), anything else propagates."""

from __future__ import annotations

import random
import threading
import time

import pytest

from pdctl.errors import HostKeyRefused, StepFailed, UnreachableError
from pdctl.ops.fanout import fan_out, raise_first_unreachable

ITEMS = [(f"decode[{k}]", k) for k in range(12)]


def test_results_come_back_labelled_in_the_order_given_whatever_finished_first():
    def slow_first(k):
        time.sleep(0.02 * (len(ITEMS) - k))  # the last item finishes first
        return k * k

    got = fan_out(ITEMS, slow_first, bound=len(ITEMS))
    assert [(r.label, r.key, r.value, r.error) for r in got] == [(label, k, k * k, None) for label, k in ITEMS]
    assert all(r.reached for r in got)
    assert fan_out([], slow_first) == []


@pytest.mark.parametrize("bound", [1, 3, 8])
def test_never_more_than_bound_calls_at_once(bound):
    lock, running, peak = threading.Lock(), [0], [0]

    def count(k):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.01 + random.random() * 0.02)
        with lock:
            running[0] -= 1
        return k

    assert [r.value for r in fan_out(ITEMS, count, bound=bound)] == list(range(len(ITEMS)))
    assert min(bound, 2) <= peak[0] <= bound  # parallel, and never more than the bound


def test_an_unreachable_or_refused_host_is_its_items_error_and_the_others_answer():
    down = UnreachableError("decode[1]: connect timed out", target="decode[1]")
    refused = HostKeyRefused("decode[3]: host key changed")

    def ask(k):
        if k == 1:
            raise down
        if k == 3:
            raise refused
        return f"up {k}"

    got = fan_out(ITEMS[:5], ask)
    assert [r.value for r in got] == ["up 0", None, "up 2", None, "up 4"]
    assert [r.error for r in got] == [None, down, None, refused, None]
    assert [r.reached for r in got] == [True, False, True, False, True]
    with pytest.raises(UnreachableError) as e:  # a command that needs every host stops with the first, in order
        raise_first_unreachable(got)
    assert e.value is down


@pytest.mark.parametrize("error", [ValueError("a bug"), StepFailed("a caller's own stop"), KeyboardInterrupt()])
def test_any_other_exception_propagates(error):
    def ask(k):
        if k == 2:
            raise error
        return k

    with pytest.raises(type(error)):
        fan_out(ITEMS[:4], ask)


def test_one_item_off_the_main_thread_runs_in_place():
    seen = []
    worker = threading.Thread(
        target=lambda: seen.extend(fan_out([("router[0]", 0)], lambda k: threading.current_thread().name))
    )
    worker.start()
    worker.join()
    assert [r.value for r in seen] == [worker.name]
