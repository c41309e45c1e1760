"""The watch's outputs are fallible (issue 28: W1, C3, C4): a sink that fails is an output line and a metric, never
the end of the watch nor of its heal hook; the timeline writer keeps what it could not write, whole lines, and
follows a rotated file. Real files and FIFOs; the Watch over the embedded default's Deployment (nothing started)."""

from __future__ import annotations

import fcntl
import json
import os
import stat

import pytest

from pdctl.checks.result import CheckResult, Status
from pdctl.checks.watch_events import RoundDone
from pdctl.checks.watch_outputs import OutputFailed, OutputLedger
from pdctl.render.watch_timeline import BACKLOG_BYTES, TimelineWriter


def _lines(n: int, t0: float = 0.0, width: int = 0) -> list[RoundDone]:
    return [RoundDone(t0 + i, "d" + "x" * width, "health", True, 0.1) for i in range(n)]


def _read(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


# -- the ledger -----------------------------------------------------------------------------------------------------
def test_a_failure_is_said_once_while_it_lasts_and_its_recovery_says_what_was_lost():
    led = OutputLedger("d")
    first = led.failed("timeline f", "f: No space left on device", 10.0)
    assert first is not None and first.to_line() == {
        "t": 10.0,
        "deployment": "d",
        "event": "output",
        "output": "timeline f",
        "status": "failing",
        "observed": "f: No space left on device",
    }
    assert led.failed("timeline f", "f: No space left on device", 11.0, dropped_lines=2) is None  # said already
    other = led.failed("timeline f", "f: Input/output error", 12.0, dropped_lines=3)  # another cause: said
    assert other is not None and other.observed == "f: Input/output error"
    assert [h.name for h in led.failing()] == ["timeline f"]
    back = led.worked("timeline f", 40.0, dropped_lines=3)
    assert back is not None and back.status == "recovered"
    assert back.observed == "writes again after 30s; 3 line(s) dropped meanwhile"
    assert led.worked("timeline f", 41.0, dropped_lines=3) is None and not led.failing()
    h = led.outputs["timeline f"]
    assert (h.failures, h.dropped_lines) == (3, 3)
    led.failed("timeline f", "f: full", 50.0, dropped_lines=3)
    assert led.worked("timeline f", 51.0, dropped_lines=3).observed.endswith("every line kept meanwhile was written")


# -- the writer ------------------------------------------------------------------------------------------------------
def test_the_timeline_is_made_0600_and_follows_a_rotation_by_rename_and_by_removal(tmp_path):
    path = tmp_path / "t.jsonl"
    w = TimelineWriter(str(path))
    w(_lines(2))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # as the audit log (S2)
    path.rename(tmp_path / "t.jsonl.1")  # logrotate's rename
    w(_lines(1, 10))
    assert [x["t"] for x in _read(tmp_path / "t.jsonl.1")] == [0, 1]
    assert [x["t"] for x in _read(path)] == [10]  # the new file at the path, not the renamed one
    path.unlink()  # removed: made again
    w(_lines(1, 20))
    assert [x["t"] for x in _read(path)] == [20]
    w.reopen()  # what SIGHUP asks: the next batch opens the path again (same file here)
    w(_lines(1, 30))
    w.close()
    assert [x["t"] for x in _read(path)] == [20, 30]


def test_a_path_turned_into_a_link_after_the_start_is_a_failing_output_not_followed(tmp_path):
    path, victim = tmp_path / "t.jsonl", tmp_path / "victim"
    victim.write_text("keep\n")
    w = TimelineWriter(str(path))
    w(_lines(1))
    path.unlink()
    path.symlink_to(victim)
    with pytest.raises(OutputFailed, match="symbolic link"):
        w(_lines(1, 5))
    assert victim.read_text() == "keep\n"
    path.unlink()
    w(_lines(1, 6))  # the path is a file again: what was kept comes first
    w.close()
    assert [x["t"] for x in _read(path)] == [5, 6]


def test_a_fifo_without_a_reader_never_blocks_and_a_reader_gets_every_kept_line_whole(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    w = TimelineWriter(str(fifo))  # C3: used to block here, before the exporter, ignoring --for
    with pytest.raises(OutputFailed, match="a FIFO nobody reads"):
        w(_lines(3))
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        w(_lines(1, 3))
        got = [json.loads(x) for x in os.read(reader, 1 << 16).splitlines()]
        assert [x["t"] for x in got] == [0, 1, 2, 3]
        # a reader that does not read: the pipe (4 KiB here) fills, the writer neither blocks nor cuts a line
        fcntl.fcntl(reader, 1031, 4096)  # F_SETPIPE_SZ
        with pytest.raises(OutputFailed, match="reader does not read"):
            for i in range(40):
                w(_lines(1, 100 + i, width=300))
        data = b""
        while chunk := _read_some(reader):
            data += chunk
        w(_lines(1, 1000))  # room again: the kept tail of the cut line first, then the rest in order
        data += _read_some(reader) or b""
        ts = [json.loads(x)["t"] for x in data.splitlines()]
        assert ts == sorted(ts) and ts[-1] == 1000 and len(ts) == len(set(ts)), ts
        os.close(reader)
        reader = -1
        with pytest.raises(OutputFailed, match="reader went away"):  # W1's FIFO: the reader left
            w(_lines(1, 2000))
    finally:
        if reader >= 0:
            os.close(reader)
        w.close()


def _read_some(fd: int) -> bytes:
    try:
        return os.read(fd, 1 << 20)
    except BlockingIOError:
        return b""


def test_a_full_backlog_drops_whole_new_lines_and_counts_them(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    w = TimelineWriter(str(fifo))
    line = RoundDone(1.0, "d" * 1000, "health", True, 0.1)  # every line the same size
    n = BACKLOG_BYTES // (len(json.dumps(line.to_line())) + 1)
    with pytest.raises(OutputFailed):
        w([line] * (n + 5))
    assert w.dropped_lines == 5
    w.close()


# -- the watch: a failing sink, the others, the hooks ----------------------------------------------------------------
class _Full:
    """A sink that fails like a full disk until told otherwise."""

    name = "timeline full"

    def __init__(self):
        self.full, self.got = True, []

    def __call__(self, events):
        if self.full:
            raise OutputFailed("full: No space left on device")
        self.got += events


def _watch(sinks, hooks=()):
    from pdctl.inventory import embedded_default
    from pdctl.ops.context import Deployment
    from pdctl.ops.watch import Watch

    dep = Deployment(embedded_default())
    return dep, Watch(dep, on_lines=list(sinks), hooks=list(hooks))


def test_a_failing_sink_is_an_output_line_to_the_others_and_a_metric_and_the_round_hooks_still_run(monkeypatch):
    from prometheus_client import CollectorRegistry, generate_latest

    from pdctl.checks.watch_schedule import CadenceClock
    from pdctl.ops import watch as watch_op
    from pdctl.ops.watch_exporter import WatchCollector
    from pdctl.ops.watch_rounds import Seen

    full, log, hooked = _Full(), [], []
    decode = "decode[0]@local:30002"
    monkeypatch.setitem(  # a round that sees a failing /health, without a deployment
        watch_op.ROUNDS, "health", lambda dep: Seen(checks=[CheckResult("health", decode, "/health", Status.FAIL)])
    )
    dep, w = _watch([full, log.extend], hooks=[lambda watch, cadence: hooked.append(cadence)])
    with dep:
        reg = CollectorRegistry(auto_describe=False)
        reg.register(WatchCollector(w))
        assert 'pdctl_output_ok{deployment="local",output="timeline full"} 1.0' in generate_latest(reg).decode()
        w._round(CadenceClock("health", 5.0))  # W1: the round's emit fails on one sink ...
        assert hooked == ["health"]  # ... and the heal's seam is still called
        said = [e.to_line() for e in log if e.EVENT == "output"]
        assert [(x["output"], x["status"]) for x in said] == [("timeline full", "failing")]
        assert any(e.EVENT is None and e.target == decode for e in log)  # the other sink got the round's lines
        text = generate_latest(reg).decode()
        assert 'pdctl_output_ok{deployment="local",output="timeline full"} 0.0' in text
        assert 'pdctl_output_ok{deployment="local",output="list"} 1.0' not in text  # named by its `name`
        w._round(CadenceClock("health", 5.0))
        assert [e.EVENT for e in log].count("output") == 1  # said once while it lasts
        full.full = False
        w.emit(RoundDone(9.0, "local", "health", True, 0.1))
        assert [x.to_line()["status"] for x in full.got if x.EVENT == "output"] == ["recovered"]
        assert 'output="timeline full"} 1.0' in generate_latest(reg).decode()


def test_a_sink_that_raises_a_bug_fails_alone_and_a_reader_gone_stops_the_watch():
    from pdctl.checks.watch_outputs import ReaderGone

    class Buggy:
        def __call__(self, events):
            raise TypeError("a bug")

    class Gone:
        name = "change lines"
        calls = 0

        def __call__(self, events):
            Gone.calls += 1
            raise ReaderGone()

    log: list = []
    dep, w = _watch([Buggy(), Gone(), log.extend])
    with dep:
        w.emit(RoundDone(1.0, "local", "health", True, 0.1))
        assert [e.to_line().get("observed") for e in log if e.EVENT == "output"] == ["TypeError: a bug"]
        assert w.outputs.reader_gone and w._stop.is_set()
        w.emit(RoundDone(2.0, "local", "health", True, 0.1))
        assert Gone.calls == 1  # called no more
        result = w.run(for_s=5)  # ends at once (its stop is set), its verdict as exit status, not 130
        assert result.reader_gone and not result.stopped_by and result.exit_code() == 3
