"""Rendering of `verify inflight`, `storm` and `triage`: tables, the terminal chart, verdict lines. Prints only via
pdctl.render's console (stdout), so `--json` stays one document."""

from __future__ import annotations

from typing import Any, Sequence

from rich.table import Table
from rich.text import Text

from pdctl import render
from pdctl.checks.inflight import fmt_s

BARS = " ▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None], *, top: float | None = None) -> str:
    """One character per value, scaled 0..top (default: the max); None = '·'. Zero is a space-like bar '▁'-free
    blank so a drained series reads as flat. Pure."""
    vals = [v for v in values if v is not None]
    hi = top if top is not None else (max(vals) if vals else 0.0)
    out = []
    for v in values:
        if v is None:
            out.append("·")
        elif v <= 0 or hi <= 0:
            out.append("_")
        else:
            out.append(BARS[max(1, min(8, round(8 * v / hi)))])
    return "".join(out)


def bar_chart(rows: Sequence[tuple[str, float | None]], width: int = 40) -> list[str]:
    """Horizontal bars 'label |██████ 11' scaled to the max value. Pure."""
    vals = [v for _l, v in rows if v is not None]
    hi = max(vals) if vals else 0.0
    lw = max((len(l) for l, _ in rows), default=0)
    lines = []
    for label, v in rows:
        if v is None:
            lines.append(f"{label.rjust(lw)} | (no sample)")
            continue
        n = 0 if hi <= 0 else round(width * v / hi)
        if v > 0 and n == 0:
            n = 1
        lines.append(f"{label.rjust(lw)} |{'█' * n} {v:g}")
    return lines


def _style(ok: bool | None) -> str:
    return "bold green" if ok else ("bold red" if ok is False else "yellow")


# -- verify inflight ----------------------------------------------------------------------------------------------
def inflight_report(rep) -> None:
    c = render.console()
    t = Table(title="inflight samples", title_justify="left")
    for col in ("t (s)", "prefill bootstrap", "prefill inflight", "decode prealloc", "decode transfer", "running",
                "generation tokens", "note"):
        t.add_column(col, justify="right" if col != "note" else "left")
    for p in rep.points:
        g = p.gauges
        t.add_row(f"{p.t:.1f}", *(_n(g.get(k)) for k in (
            "sglang:num_prefill_bootstrap_queue_reqs", "sglang:num_prefill_inflight_queue_reqs",
            "sglang:num_decode_prealloc_queue_reqs", "sglang:num_decode_transfer_queue_reqs",
            "sglang:num_running_reqs")), _n(p.generation_tokens),
                  "; ".join(f"{k}: {v}" for k, v in p.errors.items()))
    c.print(t)
    c.print(Text("inflight per sample: " + sparkline([p.inflight if p.complete else None for p in rep.points])))
    for r in rep.to_check_results():
        c.print(render.check_table("verdict", [r]))
    name = rep.name + (" (partial)" if rep.partial else "")
    ok = None if rep.name == "busy" or rep.partial else rep.exit_code() == 0
    c.print(Text(f"verify inflight: {name.upper()}", style=_style(ok)))
    for n in rep.notes + (rep.verdict.notes if rep.verdict else []):
        c.print(Text(f"  note: {n}", style="dim"))


def _n(v: Any) -> str:
    if v is None:
        return "-"
    return str(int(v)) if float(v).is_integer() else f"{v:.2f}".rstrip("0").rstrip(".")


# -- storm --------------------------------------------------------------------------------------------------------
def storm_report(rep) -> None:
    c = render.console()
    cfg = rep.config
    c.print(Text(f"storm: {cfg['requests']} requests x {cfg['prompt_tokens']} tokens via {rep.router}, "
                 f"target {cfg['target']}", style="bold"))
    if rep.calibration:
        cal = rep.calibration
        parts = [f"first token {cal.ttft_median_s:.2f}s" if cal.ttft_median_s else "no first token"]
        if cal.transfer_latency_s is not None:
            parts.append(f"KV transfer {cal.transfer_latency_s:.2f}s")
        if cal.prefill_ttft_s is not None:
            parts.append(f"prefill {cal.prefill_ttft_s:.2f}s")
        c.print(Text("calibration: " + ", ".join(parts)))
    if rep.window:
        c.print(Text(f"transfer window: {rep.window[0]:.2f}-{rep.window[1]:.2f}s after send; "
                     f"launch spacing {rep.spacing_s:g}s"))
    rows = rep.series()
    t = Table(title="inflight / transfer_failed", title_justify="left")
    for col in ("t (s)", "phase", "inflight", "prefill inflight", "transfer_failed", "generation tokens"):
        t.add_column(col, justify="right" if col != "phase" else "left")
    for r in rows:
        label = r["phase"] + (f" +{fmt_s(r['since_stop'])}" if r["since_stop"] is not None else "")
        t.add_row(f"{r['t']:.1f}", label, _n(r["inflight"]), _n(r["prefill_inflight"]), _n(r["transfer_failed"]),
                  _n(r["generation_tokens"]))
    c.print(t)
    over = rep.overcount_note()
    if over:
        c.print(Text(f"  * {over}", style="dim"))
    c.print(Text("inflight per sample:        " + sparkline([r["inflight"] for r in rows])))
    c.print(Text("transfer_failed per sample: " + sparkline([r["transfer_failed"] for r in rows])))
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
        c.print(Text(f"storm: {word}: {v.reason}", style=_style(v.passed)))


# -- triage -------------------------------------------------------------------------------------------------------
def triage_report(rep) -> None:
    c = render.console()
    t = Table(title="observations", title_justify="left")
    for col in ("what", "target", "status", "observed"):
        t.add_column(col, overflow="fold")
    for o in rep.observations:
        t.add_row(o.what, o.target, Text(o.status.value.upper(), style=render._STYLE[o.status]), o.observed)
    c.print(t)
    if not rep.findings:
        c.print(Text(rep.headline, style="bold green"))
        return
    for i, f in enumerate(rep.findings, 1):
        style = "bold red" if f.severity == "action" else "yellow"
        c.print(Text(f"finding {i} [{f.severity}]: {f.title}", style=style))
        for o in f.observed:
            c.print(Text(f"  observed: {o}"))
        for o in f.inferred:
            c.print(Text(f"  inferred: {o}", style="dim"))
        c.print(Text(f"  action:   {f.action}", style="bold"))
    c.print(Text(rep.headline, style=_style(False if rep.needs_action else None)))
