"""The storm report's figures as typed data: one row of its time series (`SeriesRow`, the `series` of
`storm --json` and the table and charts it prints) and the figures its audit record keeps (`StormSummary`, under
"summary"). Both become JSON through serialize.to_data alone, key for key as the fields below. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence

from pdctl.checks.inflight import Point
from pdctl.checks.storm import HitReport, StormVerdict

PREFILL_INFLIGHT = "sglang:num_prefill_inflight_queue_reqs"


@dataclass(frozen=True)
class SeriesRow:
    """One sample of the storm, as shown: None where the sample could not read every worker."""

    t: float  # s since the load started (negative: before it)
    phase: str  # "before" | "load" | "watch"
    since_stop: float | None  # s since the load stopped (only in the watch phase)
    inflight: float | None  # the PD queue gauges summed over prefill and decode
    prefill_inflight: float | None
    transfer_failed: float | None  # total over the workers
    generation_tokens: float | None  # decode side total


def series_rows(points: Sequence[Point], load_started_at: float, load_stopped_at: float | None) -> list[SeriesRow]:
    """The samples as rows, in order, on the load's clock (`load_stopped_at` None: the load did not stop)."""
    rows = []
    for p in points:
        phase = "load" if load_stopped_at is None or p.t < load_stopped_at else "watch"
        if p.t < load_started_at:
            phase = "before"
        rows.append(
            SeriesRow(
                t=round(p.t - load_started_at, 2),
                phase=phase,
                since_stop=round(p.t - load_stopped_at, 2)
                if load_stopped_at is not None and phase == "watch"
                else None,
                inflight=None if not p.complete else p.inflight,
                prefill_inflight=p.gauges.get(PREFILL_INFLIGHT),
                transfer_failed=p.counter_total("transfer_failed") if p.complete else None,
                generation_tokens=p.generation_tokens,
            )
        )
    return rows


@dataclass(frozen=True)
class StormSummary:
    """The storm's figures for its audit record: no time series, no per-request rows."""

    partial: bool
    verdict: StormVerdict | None
    requests: int  # requests planned (each has an outcome)
    sent: int  # of them, sent
    hits: HitReport | None
    window_s: tuple[float, float] | None  # the transfer window
    spacing_s: float
    load_s: float | None  # how long the load ran (None: it never stopped)
    samples: int
    peak_inflight: float | None  # over the complete samples
    transfer_failed_delta: float | None  # last minus first complete sample
    holders: dict[str, dict[str, float]]
    notes: list[str]
