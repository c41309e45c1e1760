"""What `pdctl verify inflight` prints: the samples, the chart and the verdict."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from pdctl import render
from pdctl.render.charts import sparkline
from pdctl.render.tables import check_table


def style_of(ok: bool | None) -> str:
    return "bold green" if ok else ("bold red" if ok is False else "yellow")


def num(v: Any) -> str:
    if v is None:
        return "-"
    return str(int(v)) if float(v).is_integer() else f"{v:.2f}".rstrip("0").rstrip(".")


def inflight_report(rep) -> None:
    c = render.console()
    t = Table(title="inflight samples", title_justify="left")
    for col in ("t (s)", "prefill bootstrap", "prefill inflight", "decode prealloc", "decode transfer", "running",
                "generation tokens", "note"):
        t.add_column(col, justify="right" if col != "note" else "left")
    for p in rep.points:
        g = p.gauges
        t.add_row(f"{p.t:.1f}", *(num(g.get(k)) for k in (
            "sglang:num_prefill_bootstrap_queue_reqs", "sglang:num_prefill_inflight_queue_reqs",
            "sglang:num_decode_prealloc_queue_reqs", "sglang:num_decode_transfer_queue_reqs",
            "sglang:num_running_reqs")), num(p.generation_tokens),
                  "; ".join(f"{k}: {v}" for k, v in p.errors.items()))
    c.print(t)
    c.print(Text("inflight per sample: " + sparkline([p.inflight if p.complete else None for p in rep.points])))
    for r in rep.to_check_results():
        c.print(check_table("verdict", [r]))
    name = rep.name + (" (partial)" if rep.partial else "")
    ok = None if rep.name == "busy" or rep.partial else rep.exit_code() == 0
    c.print(Text(f"verify inflight: {name.upper()}", style=style_of(ok)))
    for n in rep.notes + (rep.verdict.notes if rep.verdict else []):
        c.print(Text(f"  note: {n}", style="dim"))
