"""`verify inflight`: sample every prefill's and decode's /metrics over a window and judge drained / busy / pinned.

One sample = one parallel read of every worker's /metrics, reduced by checks.inflight.inflight_point (PD queue gauges
at tp_rank 0, summed; decode generation tokens) plus, per worker, the same gauges and the failure counters, so that a
pinned verdict can name the worker holding the room. Used by `pdctl verify inflight`, the optional "inflight" layer
of final-health, `pdctl storm` (its time series) and `pdctl triage`.

Every loop is bounded: at most window/interval + 2 samples, each read with the inventory's metrics timeout. Ctrl-C
(KeyboardInterrupt) inside the sampling loop stops it; the partial series is judged and marked partial.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from pdctl.checks.inflight import (
    BALANCE_WINDOW_S,
    DECODE_ROOM_GAUGES,
    PREFILL_ROOM_GAUGES,
    InflightVerdict,
    Point,
    balance_suspects_pin,
    holders,
    inflight_point,
    inflight_results,
    judge_points,
    short_gauges,
    side_rooms,
)
from pdctl.checks.metric_names import (
    BOOTSTRAP_FAILED,
    GEN_THROUGHPUT,
    GENERATION_TOKENS,
    INFLIGHT_GAUGES,
    METRICS_ON_WITNESSES,
    NUM_ABORTED_REQUESTS,
    TRANSFER_FAILED,
)
from pdctl.checks.metrics import MetricSet
from pdctl.checks.result import CheckResult
from pdctl.errors import RefusedError, UnreachableError, interrupt_again
from pdctl.ops.context import Deployment
from pdctl.ops.defaults import INFLIGHT_INTERVAL_S, INFLIGHT_WINDOW_S
from pdctl.serialize import JSON_OFF, json_key


#: (role, label, the worker's metrics or the exception that stopped their read)
WorkerRead = tuple[str, str, MetricSet | Exception]

#: every family a point is made of (read_point): only these are parsed of each worker's /metrics, which a sample
#: reads several times a second (the watch's inflight round: most of its CPU went to parsing the rest)
POINT_FAMILIES = frozenset(
    {
        *INFLIGHT_GAUGES,
        *PREFILL_ROOM_GAUGES,
        *DECODE_ROOM_GAUGES,
        TRANSFER_FAILED,
        BOOTSTRAP_FAILED,
        NUM_ABORTED_REQUESTS,
        GENERATION_TOKENS,
        GEN_THROUGHPUT,
        *METRICS_ON_WITNESSES,
    }
)


def _counter(m: MetricSet, name: str) -> float:
    v = m.value(name)
    return 0.0 if v is None else float(v)


def _read_all(dep: Deployment) -> list[WorkerRead]:
    """(role, label, MetricSet or the exception that stopped its read) for every prefill and decode, in parallel."""
    from pdctl.checks.sampling import fetch_metrics

    timeout = dep.inv.final_health.metrics_timeout

    def one(role: str, i: int) -> MetricSet | Exception:
        url, started = None, time.monotonic()
        try:
            url = dep.base_url(role, i)
            return fetch_metrics(url, timeout=timeout, families=POINT_FAMILIES)
        except UnreachableError as e:  # named by the role and its address on the host, not a tunnel's port
            return _named(e, url, started) if url is not None else e
        except Exception as e:  # PdctlError or a transport failure: recorded per worker
            return e

    out: list[WorkerRead] = []
    for r in dep.each_instance(one, roles=("prefill", "decode")):
        read = r.error if r.error is not None else r.value
        if read is not None:
            out.append((r.key[0], r.label, read))
    return out


def _named(e: UnreachableError, url, started: float) -> UnreachableError:
    """fetch_metrics' error about a RoleURL, naming the role (and, through a tunnel, the host's reason)."""
    from pdctl.checks.http_util import RoleURL, join, request_name

    if not isinstance(url, RoleURL):
        return e
    message = e.message.replace(join(url, "/metrics"), request_name(url, "/metrics"))
    if url.tunnel and (why := url.failure(started)):
        message = f"{message.split(': ', 1)[0]}: {why} on {url.host} at {url.remote} (through the SSH tunnel)"
    return UnreachableError(message, target=url.label, hint=e.hint)


def read_point(
    dep: Deployment,
    t0: float = 0.0,
    *,
    clock: Callable[[], float] = time.monotonic,
    got: list[WorkerRead] | None = None,
) -> Point:
    """Read every prefill's and decode's /metrics once, in parallel (or reduce `got`, from _read_all). Never raises
    for an unreachable worker: its error goes to `errors` (a point with errors is not used for a verdict)."""
    t = clock() - t0
    got = _read_all(dep) if got is None else got
    prefill_sets: list[MetricSet] = []
    decode_sets: list[MetricSet] = []
    per_worker: dict[str, dict[str, float]] = {}
    counters: dict[str, dict[str, float]] = {}
    thr: dict[str, float] = {}
    errors: dict[str, str] = {}
    for role, label, m in got:
        if isinstance(m, Exception):
            errors[label] = (getattr(m, "message", None) or str(m) or type(m).__name__).splitlines()[0]
            continue
        (prefill_sets if role == "prefill" else decode_sets).append(m)
        g, _gen = inflight_point([m], []) if role == "prefill" else inflight_point([], [m])
        per_worker[label] = g
        counters[label] = {
            "transfer_failed": _counter(m, TRANSFER_FAILED),
            "bootstrap_failed": _counter(m, BOOTSTRAP_FAILED),
            "aborted": _counter(m, NUM_ABORTED_REQUESTS),
        }  # what a client abort counts too
        if role == "decode":
            counters[label]["generation_tokens"] = _counter(m, GENERATION_TOKENS)
            v = m.value(GEN_THROUGHPUT, tp_rank="0")
            if v is not None:
                thr[label] = float(v)
    gauges, gen = inflight_point(prefill_sets, decode_sets)
    return Point(
        t=t,
        gauges=gauges,
        generation_tokens=gen,
        per_worker=per_worker,
        counters=counters,
        gen_throughput=thr,
        errors=errors,
        prefill_rooms=side_rooms(prefill_sets, PREFILL_ROOM_GAUGES),
        decode_rooms=side_rooms(decode_sets, DECODE_ROOM_GAUGES),
    )


@dataclass
class InflightReport:
    window_s: float
    interval_s: float
    points: list[Point] = field(metadata=json_key("samples"))
    verdict: InflightVerdict | None = field(metadata=json_key("judgement"))  # None: no complete sample was taken
    partial: bool = False  # stopped early (Ctrl-C or stop event)
    interrupted_by: str = field(default="", metadata=JSON_OFF)  # the signal that stopped it ("": Ctrl-C or none)
    notes: list[str] = field(default_factory=list)
    t0: float = field(default=0.0, metadata=JSON_OFF)  # the clock reading the samples' t are relative to
    extended_to_s: float | None = None  # sampled past the window to cover the room-balance window
    json_extra = (("verdict", "name"), "ok", "holders")

    @property
    def name(self) -> str:
        return self.verdict.verdict if self.verdict else "unknown"

    @property
    def pinned(self) -> bool:
        return self.verdict is not None and self.verdict.verdict == "pinned" and self.verdict.conclusive

    @property
    def ok(self) -> bool:
        return self.exit_code() == 0

    def holders(self) -> dict[str, dict[str, float]]:
        """Which workers hold nonzero gauges at the last complete sample (the evidence of a pin)."""
        return holders(self.points)

    def exit_code(self) -> int:
        """130 interrupted (Ctrl-C), 0 drained, 0 busy (a warning), 1 pinned (conclusive), 3 unknown: no complete
        sample (a worker could not be read in any), as every unknown."""
        if self.partial:
            return 130
        if self.verdict is None:
            return 3
        return 1 if self.pinned else 0

    def to_check_results(self) -> list[CheckResult]:
        return inflight_results(self.verdict, self.points, partial=self.partial)


def sample_inflight(
    dep: Deployment,
    window_s: float = INFLIGHT_WINDOW_S,
    interval_s: float = INFLIGHT_INTERVAL_S,
    *,
    stop: threading.Event | None = None,
    what: str = "inflight samples",
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] | None = None,
    preflight: bool = False,
    explained: frozenset[str] = frozenset(),
    balance_window_s: float = BALANCE_WINDOW_S,
) -> InflightReport:
    """Sample every `interval_s` until `window_s` is covered (at most window/interval + 2 reads), then judge.

    When the window is shorter than `balance_window_s` and ends busy but with the prefill holding a room no decode
    waits for (checks.inflight.balance_suspects_pin), sampling goes on until the balance window is covered (at
    most balance_window/interval + 2 reads): under load that is the only way to tell a pin from traffic.

    Changes nothing on the servers. Ctrl-C or `stop` ends the loop early: the partial series is judged and the
    report marked partial. Raises ValueError on a non-positive window or interval. With `preflight` (a command
    about inflight itself: verify inflight, triage), before any window: the UnreachableError / HostKeyRefused of a
    host that cannot be asked, and one UnreachableError naming every worker when none of the workers outside
    `explained` (labels whose silence is already known, e.g. stopped) answers the first sample.
    """
    if window_s <= 0 or interval_s <= 0:
        raise ValueError("window and interval must be > 0")
    if preflight:
        dep.connect_all()  # a host that cannot be asked is exit 3/4 now, not a window of unreadable samples
    stop = stop or threading.Event()
    wait = sleep or (lambda s: stop.wait(s))
    t0 = clock()
    points: list[Point] = []
    partial, by = False, ""
    target, extended = window_s, None
    max_reads = int(math.ceil(max(window_s, balance_window_s) / interval_s)) + 2
    expected = int(math.ceil(window_s / interval_s - 1e-9)) + 1  # a full window: the first read, then one per interval
    try:
        for k in range(max_reads):
            if k == 0 and preflight:
                got = _read_all(dep)
                raise_if_none_answers(got, explained=explained)
                points.append(read_point(dep, t0, clock=clock, got=got))
            else:
                points.append(read_point(dep, t0, clock=clock))
            elapsed = clock() - t0
            dep.progress.waiting(
                what, elapsed, target, detail=_progress_detail(points[-1], extended), done=len(points), total=expected
            )
            # the window is measured from the first sample (however long the first read took), so a full run
            # covers the whole window and its verdict is conclusive
            base = points[0].t
            if stop.is_set():
                partial = points[-1].t - base < window_s - 1e-6
                break
            if k > 0 and points[-1].t - base >= target - 1e-6:
                if extended is None and target < balance_window_s and balance_suspects_pin(points, balance_window_s):
                    target = extended = balance_window_s
                    expected = int(math.ceil(target / interval_s - 1e-9)) + 1
                else:
                    break
            next_t = base + min((k + 1) * interval_s, target)
            wait(max(0.0, next_t - (clock() - t0)) + 0.005)
            if stop.is_set():
                partial = True
                break
    except KeyboardInterrupt as e:
        partial, by = True, getattr(e, "signal_name", "")
    verdict, notes = judge_points(points, window_s, balance_window_s=balance_window_s)
    if extended is not None:
        notes.append(
            f"sampled {extended:g}s, past the {window_s:g}s window: busy, but the prefill held more rooms "
            "than the decode waited for, so the room balance was given its full window"
        )
    if partial:
        notes.append(f"interrupted{f' by {by}' if by else ''}: the series is partial")
    return InflightReport(
        window_s,
        interval_s,
        points,
        verdict,
        partial=partial,
        notes=notes,
        t0=t0,
        extended_to_s=extended,
        interrupted_by=by,
    )


def raise_if_none_answers(got: list[WorkerRead], *, explained: frozenset[str] = frozenset()) -> None:
    """Raise when no worker (outside `explained`) could be asked at all: a RefusedError as is; else one
    UnreachableError (exit 3) naming each worker and why. A worker that answered, even with an error, is asked."""
    asked = [(label, m) for _role, label, m in got if label not in explained]
    unasked = [(label, m) for label, m in asked if isinstance(m, (UnreachableError, RefusedError))]
    if not asked or len(unasked) < len(asked):
        return
    refused = next((m for _l, m in unasked if isinstance(m, RefusedError)), None)
    if refused is not None:
        raise refused
    lines = "; ".join(m.message.splitlines()[0] for _l, m in unasked)
    raise UnreachableError(
        f"no worker's /metrics could be read: {lines}",
        target=unasked[0][0],
        hint=unasked[0][1].hint
        or "is the role running and listening (pdctl status, pdctl logs ROLE)? nothing was sampled",
    )


def _progress_detail(p: Point, extended: float | None = None) -> str:
    if p.errors:
        return f"{len(p.errors)} worker(s) unreadable"
    gen = f", generation_tokens={p.generation_tokens:g}" if p.generation_tokens is not None else ""
    why = f"; prefill holds unmatched rooms: sampling to {extended:g}s" if extended else ""
    return (short_gauges(p.gauges) or "all queues 0") + gen + why


def inflight_layer(
    dep: Deployment, window_s: float = INFLIGHT_WINDOW_S, interval_s: float = INFLIGHT_INTERVAL_S
) -> list[CheckResult]:
    """The optional "inflight" layer of final-health. Ctrl-C while sampling re-raises KeyboardInterrupt (the CLI
    exits 130, as `verify inflight` does): an interrupted window is no verdict, and softening it to a warning would
    let final-health exit 0. As `verify inflight`, raises UnreachableError (exit 3) at the first sample when no
    worker's /metrics can be read: a window of unreadable samples would only wait to say the same as a FAIL."""
    rep = sample_inflight(dep, window_s, interval_s, preflight=True)
    if rep.partial:  # no stop event here: partial means Ctrl-C, or the signal it names
        raise interrupt_again(rep.interrupted_by)
    return rep.to_check_results()


__all__ = [
    "Point",
    "InflightReport",
    "read_point",
    "sample_inflight",
    "judge_points",
    "inflight_layer",
    "INFLIGHT_GAUGES",
]
