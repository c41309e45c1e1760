"""`pdctl storm`: the seed's abort storm through the inventory's router, with a verdict on whether inflight drains.

Sequence: baseline sample -> (transfer-window) calibration with lone un-aborted requests -> the load (streaming
requests, each closed by the client at its abort time) while a sampler reads every worker's /metrics every
`sample_every` s -> after the load stops, keep sampling for `watch` s -> the judgement (checks.storm.judge_storm:
verdict, who held the rooms, hit rate). Only the router, timing and metrics are used, so it runs against real SGLang
unchanged. Only the inventory's own router is ever sent traffic. Every phase is bounded (a load phase cut by its
bound keeps every finished request's outcome); Ctrl-C ends the run, stops and joins the sampler, and returns what
was gathered, marked partial. Every storm appends one audit record (it is a load-generating action), interrupted or
failed too.
"""

from __future__ import annotations

import asyncio
import math
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from pdctl.checks.inflight import Point, fmt_count, short_gauges
from pdctl.checks.router_address import parse_router_address
from pdctl.checks.storm import HitReport, RequestOutcome, StormVerdict, judge_storm
from pdctl.errors import UnreachableError, UsageError
from pdctl.ops.context import Deployment
from pdctl.ops.inflight import read_point
from pdctl.ops.storm_client import generate_body, run_requests
from pdctl.ops.storm_figures import SeriesRow, StormSummary, series_rows
from pdctl.ops.storm_calibrate import calibrate
from pdctl.ops.storm_plan import Calibration, StormConfig, aimed_schedule, prompt_ids, random_schedule, storm_bound_s
from pdctl.serialize import JSON_OFF, json_key, to_data


@dataclass
class StormReport:
    config: dict[str, Any]
    router: str
    calibration: Calibration | None = None
    window: tuple[float, float] | None = field(default=None, metadata=json_key("window_s"))
    spacing_s: float = 0.0
    # the samples are in the document as its `series` (one row each); the run's clock readings are not
    points: list[Point] = field(default_factory=list, metadata=JSON_OFF)  # t relative to the storm start
    load_started_at: float = field(default=0.0, metadata=JSON_OFF)
    load_stopped_at: float | None = field(default=None, metadata=JSON_OFF)
    outcomes: list[RequestOutcome] = field(default_factory=list, metadata=json_key("requests"))
    hits: HitReport | None = None
    verdict: StormVerdict | None = None
    holders: dict[str, dict[str, float]] = field(default_factory=dict)
    partial: bool = False
    notes: list[str] = field(default_factory=list)
    t0: float = field(default=0.0, metadata=JSON_OFF)  # monotonic clock at the storm start
    interrupted_by: str = field(default="", metadata=JSON_OFF)  # the signal that stopped it ("": Ctrl-C or none)
    json_extra = ("ok", ("weak_pass", "weak_reason"), ("series", "series_rows"))

    @property
    def ok(self) -> bool:
        return self.verdict is not None and self.verdict.passed and not self.partial

    def exit_code(self) -> int:
        if self.partial:
            return 130
        return 0 if self.ok else 1

    @property
    def weak_reason(self) -> str | None:
        """Why a pass is weak evidence (the race was not shown to be exercised), or None: a failed or partial storm,
        or a pass where at least one abort landed in the transfer window (by the servers' count, else by timing). A
        weak pass still exits 0. Pure."""
        if not self.ok:
            return None
        h = self.hits
        retry = (
            "try --target transfer-window"
            if self.config.get("target") != "transfer-window"
            else "try more --requests, or a longer prompt (--prompt-tokens) to widen the window"
        )
        if h is None:
            return "no request outcome to judge; the race was not shown to be exercised; " + retry
        if h.confirmed_in_window:  # the servers saw aborts reach rooms whose KV was moving: exercised, whatever
            return None  # the client's timing (an estimate) says
        if h.window is None:
            return (
                "no transfer window was calibrated (--calibrate 0), so no abort is known to have landed in it; "
                "the race may not have been exercised; " + retry
            )
        if h.hits == 0:
            return f"0 of {h.aborted} aborts landed in the transfer window; the race was not exercised; " + retry
        return None

    def overcount_note(self) -> str | None:
        """A footnote when the inflight total exceeds the storm's own requests during the load, or None. Pure."""
        n = self.config.get("requests") or 0
        load = [
            p
            for p in self.points
            if p.complete
            and p.t >= self.load_started_at
            and (self.load_stopped_at is None or p.t < self.load_stopped_at + 1e-6)
        ]
        peak = max((p.inflight for p in load), default=0.0)
        if peak <= n:
            return None
        before = self.points[0].inflight if self.points and self.points[0].complete else 0.0
        extra = f"; {fmt_count(before)} were already queued before the storm" if before else ""
        return (
            f"inflight peaked at {fmt_count(peak)} with --requests {n}: inflight is the sum of the PD queue "
            "gauges of prefill and decode, so a request whose KV is moving is counted on both sides (prefill "
            "inflight queue and decode transfer queue)" + extra
        )

    def series_rows(self) -> list[SeriesRow]:
        """Rows of the time series: t (since load start), phase, inflight total, transfer_failed total."""
        return series_rows(self.points, self.load_started_at, self.load_stopped_at)


def router_url(dep: Deployment, target: str | None) -> str:
    """The base URL of the inventory's router to send the storm to. `target` (optional, "host:port" or a URL) must
    name one of the inventory's routers: anything else raises UsageError (exit 2) -- the storm never sends traffic
    to a host the inventory does not declare."""
    routers = [(i, inst) for _r, i, inst in dep.inv.instances("router")]
    if not routers:
        raise UsageError("the inventory declares no router")
    if target is None:
        return dep.base_url("router", routers[0][0])
    for i, _inst in routers:
        # the label pdctl names it by, "router[0]@gpu1:30001"
        if isinstance(target, str) and target.strip() == dep.inv.label("router", i):
            return dep.base_url("router", i)
    try:
        want = parse_router_address(target)
    except ValueError as e:
        raise UsageError(f"--router {target!r}: {e}", hint="give host:port of the inventory's router") from None
    for i, inst in routers:
        host = dep.inv.hosts[inst.host]
        names = {host.address, inst.listen_host}
        if host.runs_here or host.address in ("127.0.0.1", "localhost"):
            names |= {"127.0.0.1", "localhost"}
        if want.host.lower() in {n.lower() for n in names if n} and want.port == inst.port:
            return dep.base_url("router", i)
    declared = ", ".join(f"{dep.inv.hosts[inst.host].address}:{inst.port}" for _i, inst in routers)
    raise UsageError(
        f"--router {target!r} is not the inventory's router ({declared}): refused",
        hint="the storm only sends traffic to the inventory's own router",
    )


class _Sampler(threading.Thread):
    """Reads a Point every `every` s until stopped; bounded by `max_points`."""

    def __init__(self, dep: Deployment, t0: float, every: float, max_points: int, points: list[Point]):
        super().__init__(name="storm-sampler", daemon=True)
        self.dep, self.t0, self.every, self.max_points, self.points = dep, t0, every, max_points, points
        self.stop = threading.Event()

    def run(self) -> None:
        k = 0
        start = time.monotonic()
        while not self.stop.is_set() and k < self.max_points:
            self.points.append(read_point(self.dep, self.t0))
            k += 1
            self.stop.wait(max(0.0, k * self.every - (time.monotonic() - start) + 0.005))


def run_load(
    base: str,
    cfg: StormConfig,
    plan: list[tuple[float, float | None]],
    make_body,
    *,
    bound_s: float,
    outcomes: list[RequestOutcome],
    on_done=None,
    send=None,
) -> bool:
    """The load phase: run `plan` through the router, bounded by `bound_s` seconds. Fills `outcomes` (the caller's
    list) in place, so every finished request is kept when the bound cuts the load or Ctrl-C stops it; requests the
    stop cut or never sent carry an `error` saying so. Returns True when the bound expired. KeyboardInterrupt
    propagates (after the event loop closed every connection)."""
    try:
        asyncio.run(
            asyncio.wait_for(
                run_requests(
                    base,
                    cfg.path,
                    plan,
                    make_body,
                    timeout_s=cfg.request_timeout_s,
                    on_done=on_done,
                    outcomes=outcomes,
                    send=send,
                ),
                timeout=bound_s,
            )
        )
        return False
    except asyncio.TimeoutError:
        return True
    finally:
        for o in outcomes:
            if o.finished_s is None and o.aborted_s is None and o.error is None:
                o.error = "no outcome: the load phase was stopped (time bound or Ctrl-C)"


def storm(dep: Deployment, cfg: StormConfig, *, router: str | None = None) -> StormReport:
    """Run the storm. Sends traffic only to the inventory's router. Returns the report (never raises for an
    unhealthy deployment); raises UsageError for a router outside the inventory (before any traffic); Ctrl-C -> a
    partial report; raises UnreachableError (exit 3) when the router cannot be asked at all (before any traffic).
    Appends one audit record ("storm") once the router is accepted and answers: passed, failed, interrupted, or
    the error that stopped it."""
    from pdctl import audit

    base = router_url(dep, router)
    _ask_router(base, dep.inv.final_health.health_timeout)
    rep = StormReport(config={k: getattr(cfg, k) for k in cfg.__dataclass_fields__}, router=base)
    with audit.audited("storm", inventory=dep.inv.source, args=dict(rep.config, router=base), mark_start=True) as rec:
        try:
            _run_storm(dep, cfg, base, rep)
        finally:
            rec.extra["summary"] = to_data(summary(rep))  # what was gathered, also when stopped
        rec.result = audit_result(rep)
        if rep.exit_code():  # as an error's record: history words a caught Ctrl-C as the CLI's exit did (130)
            rec.extra["exit_code"] = rep.exit_code()
        return rep


def _ask_router(base: str, timeout: float) -> None:
    """One GET /health before any load: a router that cannot be asked at all (refused, no route; through a tunnel,
    the host's own reason) is UnreachableError naming it by its label and its address on the host, never a storm
    of failed requests read as a verdict. Any HTTP answer, even an error status, lets the storm go on: judging
    the router's health is final-health's job."""
    from httpx import HTTPError

    from pdctl.checks.http_util import client, describe_error, join, request_name

    c = client()
    started = time.monotonic()
    try:
        c.get(join(base, "/health"), timeout=timeout)
    except HTTPError as e:
        raise UnreachableError(
            f"{request_name(base, '/health')}: {describe_error(e, timeout, base, started)}",
            target=getattr(base, "label", base),
            hint="is the router running? pdctl status; pdctl verify final-health",
        ) from None


def audit_result(rep: StormReport) -> str:
    """The audit record's result: "passed", "interrupted" or "failed: <the verdict's reason>". Pure."""
    if rep.partial:
        return f"interrupted by {rep.interrupted_by}" if rep.interrupted_by else "interrupted"
    if rep.ok:
        return "passed"
    reason = rep.verdict.reason if rep.verdict else "no verdict"
    return "failed: " + (reason if len(reason) <= 300 else reason[:297] + "...")


def summary(rep: StormReport) -> StormSummary:
    """The storm's figures for the audit record (no time series, no per-request rows). Pure."""
    good = [p for p in list(rep.points) if p.complete]
    tf = (good[-1].counter_total("transfer_failed") - good[0].counter_total("transfer_failed")) if good else None
    return StormSummary(
        partial=rep.partial,
        verdict=rep.verdict,
        requests=len(rep.outcomes),
        sent=sum(1 for o in rep.outcomes if not (o.error or "").startswith("not sent")),
        hits=rep.hits,
        window_s=rep.window or None,
        spacing_s=rep.spacing_s,
        load_s=None if rep.load_stopped_at is None else round(rep.load_stopped_at - rep.load_started_at, 2),
        samples=len(rep.points),
        peak_inflight=max((p.inflight for p in good), default=None),
        transfer_failed_delta=tf,
        holders=rep.holders,
        notes=rep.notes,
    )


def _run_storm(dep: Deployment, cfg: StormConfig, base: str, rep: StormReport) -> None:
    """The storm's phases, filling `rep`; ends with the judgement. Ctrl-C marks `rep` partial and still judges."""
    rng = random.Random(cfg.seed)
    t0 = rep.t0 = time.monotonic()
    sampler: _Sampler | None = None
    try:
        rep.points.append(read_point(dep, t0))
        if rep.points[0].complete and rep.points[0].inflight:
            rep.notes.append(
                f"inflight was already {fmt_count(rep.points[0].inflight)} before the storm "
                f"({short_gauges(rep.points[0].gauges)}): other traffic or an earlier pin"
            )
        calib = calibrate(dep, base, cfg, rng) if cfg.calib_requests else None
        rep.calibration = calib
        if calib is not None and calib.ok:
            rep.window = calib.window(cfg.aim_lo_frac, cfg.aim_hi_frac)
        if cfg.target == "transfer-window":
            if calib is None or rep.window is None:  # the transfer window is aimed at only once calibrated
                rep.notes.append("calibration failed: " + "; ".join(calib.failures[:3] if calib else ["not run"]))
                rep.verdict = StormVerdict(
                    False, "calibration failed: no request reached its first token", None, 0, 0, False, False
                )
                return
            rep.spacing_s = cfg.spacing_s if cfg.spacing_s is not None else round(1.1 * calib.service_time(), 3)
            plan = [(launch, abort) for launch, abort in aimed_schedule(cfg.requests, rep.window, rep.spacing_s, rng)]
        else:
            rep.spacing_s = cfg.spacing_s or 0.0
            plan = [
                (k * rep.spacing_s, a)
                for k, a in enumerate(random_schedule(cfg.requests, cfg.abort_min_s, cfg.abort_max_s, rng))
            ]
        bound = storm_bound_s(cfg, rep.spacing_s, max(a for _l, a in plan))
        bodies = [
            generate_body(prompt_ids(cfg.prompt_tokens, rng), cfg.max_new_tokens, cfg.path) for _ in range(cfg.requests)
        ]
        max_points = int(math.ceil((bound + cfg.watch_s) / cfg.sample_every_s)) + 4
        sampler = _Sampler(dep, t0, cfg.sample_every_s, max_points, rep.points)
        rep.load_started_at = time.monotonic() - t0
        done = [0]

        def on_done(_o: RequestOutcome) -> None:
            done[0] += 1
            dep.progress.waiting(
                "storm requests", time.monotonic() - t0 - rep.load_started_at, bound, done=done[0], total=cfg.requests
            )

        sampler.start()
        with dep.progress.step(f"storm: {cfg.requests} requests, target {cfg.target}"):
            load_plan: list[tuple[float, float | None]] = list(plan)  # run_load's type allows a request never aborted
            if run_load(
                base, cfg, load_plan, lambda k: bodies[k], bound_s=bound, outcomes=rep.outcomes, on_done=on_done
            ):
                rep.notes.append(
                    f"load phase hit its bound of {bound:.0f}s; unfinished requests were closed (their outcomes say so)"
                )
        rep.load_stopped_at = time.monotonic() - t0
        rep.points.append(read_point(dep, t0))  # t+0 of the watch
        # the watch: keep sampling for `watch` s after the load stopped, then one last read at the end
        with dep.progress.step(f"watch inflight for {cfg.watch_s:g}s (every {cfg.sample_every_s:g}s)"):
            end = t0 + rep.load_stopped_at + cfg.watch_s
            while time.monotonic() < end and sampler.is_alive():
                left = end - time.monotonic()
                dep.progress.waiting(
                    "inflight to drain", cfg.watch_s - left, cfg.watch_s, detail=_last_detail(rep.points)
                )
                sampler.stop.wait(min(1.0, max(0.0, left)))
            _stop_sampler(dep, sampler)
            rep.points.append(read_point(dep, t0))
    except KeyboardInterrupt as e:
        rep.partial, rep.interrupted_by = True, getattr(e, "signal_name", "")
        rep.notes.append(
            f"interrupted ({rep.interrupted_by or 'Ctrl-C'}): the report covers what was gathered; "
            "connections were closed"
        )
        if rep.load_stopped_at is None:
            rep.load_stopped_at = time.monotonic() - t0
    finally:
        if sampler is not None and not _stop_sampler(dep, sampler):
            rep.notes.append("the metrics sampler did not stop in time: samples after this point are left out")
    conclude(rep, cfg)


def _stop_sampler(dep: Deployment, sampler: _Sampler) -> bool:
    """Stop the sampler and wait for its current read (bounded by the metrics timeout). True when it has ended."""
    sampler.stop.set()
    if sampler.is_alive():
        sampler.join(timeout=dep.inv.final_health.metrics_timeout + 5)
    return not sampler.is_alive()


def _last_detail(points: list[Point]) -> str:
    p = next((p for p in reversed(points) if p.complete), None)
    return "" if p is None else (f"inflight={p.inflight:g} transfer_failed={p.counter_total('transfer_failed'):g}")


def conclude(rep: StormReport, cfg: StormConfig) -> None:
    """Fill `rep` with checks.storm.judge_storm's judgement of what was gathered. Works on a sorted COPY of the
    points: call it only after the sampler was stopped (a sampler that missed its join could still append to the
    old list)."""
    rep.points = sorted(list(rep.points), key=lambda p: p.t)
    j = judge_storm(
        rep.points,
        rep.outcomes,
        load_stopped_at=rep.load_stopped_at,
        watch_s=cfg.watch_s,
        partial=rep.partial,
        verdict=rep.verdict,
        window=rep.window,
        calibrated=rep.calibration is not None,
        concurrent=rep.spacing_s == 0 and cfg.requests > 1,
    )
    rep.verdict, rep.holders, rep.hits = j.verdict, j.holders, j.hits
    rep.notes += j.notes
