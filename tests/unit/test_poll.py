"""poll_until: the one wait loop (fake clock: pure logic)."""

from pdctl.poll import poll_until


class Clock:
    def __init__(self):
        self.t = 0.0
        self.sleeps = []

    def now(self):
        return self.t

    def sleep(self, s):
        self.sleeps.append(s)
        self.t += s


def test_returns_first_satisfying_value_and_counts_tries():
    c, seen = Clock(), []
    values = iter([1, 2, 3, 4])

    w = poll_until(
        lambda: next(values),
        lambda v: v >= 3,
        timeout=10,
        interval=0.5,
        on_wait=lambda v, e, lim: seen.append((v, e, lim)),
        clock=c.now,
        sleep=c.sleep,
    )
    assert w.ok and w.value == 3 and w.expired is None
    assert seen == [(1, 0.0, 10), (2, 0.5, 10)]
    assert c.sleeps == [0.5, 0.5]


def test_timeout_names_the_limit_and_never_sleeps_past_it():
    c, calls = Clock(), []

    def observe():
        calls.append(c.t)
        return "missing"

    w = poll_until(
        observe, lambda v: False, timeout=1.0, interval=0.4, timeout_name="ready_timeout", clock=c.now, sleep=c.sleep
    )
    assert not w.ok and w.expired == "ready_timeout" and w.limit == 1.0 and w.value == "missing"
    assert calls[0] == 0.0 and abs(calls[-1] - 1.0) < 1e-9  # looked at once and once more at the deadline
    assert abs(sum(c.sleeps) - 1.0) < 1e-9


def test_zero_timeout_still_looks_once():
    c = Clock()
    w = poll_until(lambda: 7, lambda v: v == 7, timeout=0, interval=1, clock=c.now, sleep=c.sleep)
    assert w.ok and c.sleeps == []


def test_on_wait_may_stop_the_wait_by_raising():
    import pytest

    c = Clock()

    def died(v, e, lim):
        raise RuntimeError("process exited")

    with pytest.raises(RuntimeError, match="exited"):
        poll_until(lambda: 0, lambda v: False, timeout=5, interval=1, on_wait=died, clock=c.now, sleep=c.sleep)


def test_backoff_grows_the_interval_up_to_its_cap():
    c = Clock()
    poll_until(
        lambda: 0,
        lambda v: False,
        timeout=1.0,
        interval=0.02,
        backoff=2.0,
        max_interval=0.1,
        clock=c.now,
        sleep=c.sleep,
    )
    assert c.sleeps[:4] == [0.02, 0.04, 0.08, 0.1] and max(c.sleeps) == 0.1
