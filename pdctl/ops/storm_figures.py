"""The storm report's figures as typed data: one row of its time series (`SeriesRow`, the `series` of
`storm --json` and the table and charts it prints) and the figures its audit record keeps (`StormSummary`, under
"summary"). Both become JSON through serialize.to_data alone, key for key as the fields below. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pdctl.checks.storm import HitReport, StormVerdict

if TYPE_CHECKING:
    from pdctl.ops.storm import StormReport

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


def series_rows(rep: StormReport) -> list[SeriesRow]:
    """The report's samples as rows, in order."""
    rows = []
    for p in rep.points:
        phase = "load" if rep.load_stopped_at is None or p.t < rep.load_stopped_at else "watch"
        if p.t < rep.load_started_at:
            phase = "before"
        rows.append(
            SeriesRow(
                t=round(p.t - rep.load_started_at, 2),
                phase=phase,
                since_stop=round(p.t - rep.load_stopped_at, 2)
                if rep.load_stopped_at is not None and phase == "watch"
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


def storm_summary(rep: StormReport) -> StormSummary:
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
