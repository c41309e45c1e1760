"""What `pdctl verify inflight` prints: the samples, the chart and the verdict."""

from __future__ import annotations

from typing import Any

from pdctl import render
from pdctl.render.charts import vertical_chart
from pdctl.render.escape_controls import Text
from pdctl.render.layout import Col, grid
from pdctl.render.tables import check_block


def style_of(ok: bool | None) -> str:
    return "bold green" if ok else ("bold red" if ok is False else "yellow")


def num(v: Any) -> str:
    if v is None:
        return "-"
    return str(int(v)) if float(v).is_integer() else f"{v:.2f}".rstrip("0").rstrip(".")


INFLIGHT_COLS = (
    Col("t (s)", ident=True, right=True, head=True),
    Col("prefill bootstrap", right=True),
    Col("prefill inflight", right=True),
    Col("decode prealloc", right=True),
    Col("decode transfer", right=True),
    Col("running", right=True),
    Col("generation tokens", right=True),
    Col("note"),
)
_GAUGES = (
    "sglang:num_prefill_bootstrap_queue_reqs",
    "sglang:num_prefill_inflight_queue_reqs",
    "sglang:num_decode_prealloc_queue_reqs",
    "sglang:num_decode_transfer_queue_reqs",
    "sglang:num_running_reqs",
)


def print_chart(c, values, times, title: str) -> None:
    """A labelled column chart of a series, as wide as the console (pdctl.render.charts)."""
    for i, line in enumerate(vertical_chart(values, times, width=c.width, title=title)):
        c.print(Text(line, style="bold" if i == 0 else ""), no_wrap=i > 0, crop=False)


def inflight_report(rep) -> None:
    c = render.console()
    rows = [
        (
            f"{p.t:.1f}",
            *(num(p.gauges.get(k)) for k in _GAUGES),
            num(p.generation_tokens),
            "; ".join(f"{k}: {v}" for k, v in p.errors.items()),
        )
        for p in rep.points
    ]
    c.print(grid("inflight samples", INFLIGHT_COLS, rows, c.width, narrow="inline"))
    print_chart(
        c, [p.inflight if p.complete else None for p in rep.points], [p.t for p in rep.points], "inflight per sample"
    )
    for r in rep.to_check_results():
        c.print(Text("verdict", style="italic"))
        for part in check_block(r, c.width):
            c.print(part)
    name = rep.name + (" (partial)" if rep.partial else "")
    ok = None if rep.name == "busy" or rep.partial else rep.exit_code() == 0
    c.print(Text(f"verify inflight: {name.upper()}", style=style_of(ok)))
    for n in rep.notes + (rep.verdict.notes if rep.verdict else []):
        c.print(Text(f"  note: {n}", style="dim"))
