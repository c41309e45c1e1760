"""What `pdctl storm` prints: calibration, the series, the instances that failed transfers or held requests (one
row each, the others counted), the hit rate and the verdict."""

from __future__ import annotations

from pdctl import render
from pdctl.checks.inflight import fmt_s, short_gauges
from pdctl.render.escape_controls import Text
from pdctl.render.inflight import num, print_chart, style_of
from pdctl.render.layout import Col, grid

SERIES_COLS = (
    Col("t (s)", ident=True, right=True, head=True),
    Col("phase", ident=True, head=True),
    Col("inflight", right=True),
    Col("prefill inflight", right=True),
    Col("transfer_failed", right=True),
    Col("generation tokens", right=True),
)


INSTANCE_COLS = (
    Col("instance", ident=True, head=True),
    Col("transfer_failed", ident=True, right=True, head=True),
    Col("held at the end"),
)


def instance_rows(rep) -> tuple[list[tuple], int]:
    """One row per worker whose transfer_failed rose during the storm or that held requests at the end (failing
    first, in inventory order), and how many other workers were read. Pure."""
    good = [p for p in rep.points if p.complete]
    if not good:
        return [], 0
    first, last = good[0], good[-1]
    rows, quiet = [], 0
    for label in last.counters:
        rise = last.counters[label].get("transfer_failed", 0.0) - first.counters.get(label, {}).get(
            "transfer_failed", 0.0
        )
        held = rep.holders.get(label) or {}
        if rise > 0 or held:  # a counter that went down: the process restarted, no failure
            rows.append((label, f"+{num(rise)}", short_gauges(held) if held else ""))
        else:
            quiet += 1
    return rows, quiet


def storm_report(rep) -> None:
    c = render.console()
    cfg = rep.config
    c.print(
        Text(
            f"storm: {cfg['requests']} requests x {cfg['prompt_tokens']} tokens via {rep.router}, "
            f"target {cfg['target']}",
            style="bold",
        )
    )
    if rep.calibration:
        cal = rep.calibration
        parts = [f"first token {cal.ttft_median_s:.2f}s" if cal.ttft_median_s else "no first token"]
        if cal.transfer_latency_s is not None:
            parts.append(f"KV transfer {cal.transfer_latency_s:.2f}s")
        if cal.prefill_ttft_s is not None:
            parts.append(f"prefill {cal.prefill_ttft_s:.2f}s")
        if cal.background_per_s:
            parts.append(f"under background traffic of {cal.background_per_s:g} req/s (taken out)")
        c.print(Text("calibration: " + ", ".join(parts)))
    if rep.window:
        c.print(
            Text(
                f"transfer window: {rep.window[0]:.2f}-{rep.window[1]:.2f}s after send; "
                f"launch spacing {rep.spacing_s:g}s"
            )
        )
    series = rep.series_rows()
    cells = [
        (
            f"{r.t:.1f}",
            r.phase + (f" +{fmt_s(r.since_stop)}" if r.since_stop is not None else ""),
            num(r.inflight),
            num(r.prefill_inflight),
            num(r.transfer_failed),
            num(r.generation_tokens),
        )
        for r in series
    ]
    c.print(grid("inflight / transfer_failed", SERIES_COLS, cells, c.width, narrow="inline"))
    over = rep.overcount_note()
    if over:
        c.print(Text(f"  * {over}", style="dim"))
    times = [r.t for r in series]
    print_chart(c, [r.inflight for r in series], times, "inflight per sample")
    print_chart(c, [r.transfer_failed for r in series], times, "transfer_failed per sample")
    rows, quiet = instance_rows(rep)
    if rows:
        c.print(
            grid("instances that failed transfers or held requests", INSTANCE_COLS, rows, c.width, narrow="stacked")
        )
    if quiet and (rows or quiet > 2):
        c.print(
            Text(
                f"  {'other ' if rows else ''}{quiet} worker(s): transfer_failed +0, nothing held at the end",
                style="dim",
            )
        )
    if rep.hits:
        h = rep.hits
        rate = "n/a" if h.hit_rate is None else f"{100 * h.hit_rate:.0f}%"
        counts = ", ".join(f"{k} {v}" for k, v in h.counts.items() if v)
        conf = "" if h.confirmed_in_window is None else f"; confirmed by the servers: {h.confirmed_in_window:g}"
        c.print(Text(f"hit rate: {rate} ({h.hits}/{h.aborted} aborts in the transfer window; {counts}){conf}"))
        for n in h.notes:
            c.print(Text(f"  note: {n}", style="dim"))
    for n in rep.notes:
        c.print(Text(f"note: {n}", style="dim"))
    v = rep.verdict
    if rep.partial:
        c.print(Text("storm: INTERRUPTED (partial)" + (f": {v.reason}" if v else ""), style="yellow"))
    elif v is not None:
        weak = rep.weak_reason
        if v.passed and weak:
            c.print(Text(f"storm: PASS (weak: {weak}): {v.reason}", style="yellow"))
            return
        word = "PASS" if v.passed else ("FAIL: PINNED" if v.pinned else "FAIL")
        c.print(Text(f"storm: {word}: {v.reason}", style=style_of(v.passed)))
