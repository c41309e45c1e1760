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


def print_chart(c, values, times, title: str, height: int = 5) -> None:
    """A labelled column chart of a series, as wide as the console (pdctl.render.charts)."""
    for i, line in enumerate(vertical_chart(values, times, width=c.width, title=title, height=height)):
        c.print(Text(line, style="bold" if i == 0 else ""), no_wrap=i > 0, crop=False)


#: what to run on a conclusive pin (triage's action for the seed's wedge: collect the logs first)
PIN_STEP = "pdctl triage"


def changed_rows(rows: list[tuple], keep: int = 8) -> tuple[list[tuple], int]:
    """At most about `keep` sample rows: the first, the last, and each whose readings differ from the row before
    (the chart below shows the whole series); with how many unchanged rows were left out. Pure."""
    if len(rows) <= keep:
        return rows, 0
    shown = [r for k, r in enumerate(rows) if k in (0, len(rows) - 1) or r[1:] != rows[k - 1][1:]]
    return shown, len(rows) - len(shown)


def inflight_report(rep) -> None:
    """A failure (pinned, unknown): the verdict and the next command first and last. The samples table keeps the
    rows whose readings changed; the chart draws every sample."""
    from pdctl.render.fit_screen import closing

    c = render.console()
    name = rep.name + (" (partial)" if rep.partial else "")
    ok = None if rep.name == "busy" or rep.partial else rep.exit_code() == 0
    failing = rep.exit_code() not in (0, 130)
    step = PIN_STEP if rep.pinned else ("pdctl status" if failing else "")
    if failing:
        c.print(Text(f"verify inflight: {name.upper()}", style=style_of(ok)))
        c.print(Text("next: ", style="yellow") + Text(step))
    rows = [
        (
            f"{p.t:.1f}",
            *(num(p.gauges.get(k)) for k in _GAUGES),
            num(p.generation_tokens),
            "; ".join(f"{k}: {v}" for k, v in p.errors.items()),
        )
        for p in rep.points
    ]
    rows, left_out = changed_rows(rows) if failing else (rows, 0)
    title = "inflight samples" + (
        f" ({left_out} like the one before not listed; the chart has all)" if left_out else ""
    )
    c.print(grid(title, INFLIGHT_COLS, rows, c.width, narrow="inline"))
    values = [p.inflight if p.complete else None for p in rep.points]
    print_chart(c, values, [p.t for p in rep.points], "inflight per sample", height=3 if failing else 5)
    for r in rep.to_check_results():
        if not failing:  # a failure's verdict is the first line already
            c.print(Text("verdict", style="italic"))
        for part in check_block(r, c.width):
            c.print(part)
    if not failing:
        c.print(Text(f"verify inflight: {name.upper()}", style=style_of(ok)))
    for n in rep.notes + (rep.verdict.notes if rep.verdict else []):
        c.print(Text(f"  note: {n}", style="dim"))
    if failing:
        c.print(Text(closing(f"verify inflight: {name.upper()}", step), style=style_of(ok)))
