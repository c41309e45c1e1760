"""The incident write-up's charts, drawn by matplotlib (Agg, no display) as SVG with text as paths (no font needed to
open them, none fetched): each worker's PD queues, its KV failure counters, and each pair canary's latency and
result, over the window, with the heals and the operator's actions marked across every chart. matplotlib is
imported here only, when a write-up is drawn (`pdctl --help` never pays for it)."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from pdctl.checks.incident_signals import Points, Signals

WIDTH_IN, HEIGHT_IN = 9.0, 3.0


@dataclass(frozen=True)
class Chart:
    name: str  # file-name part: "queues", "failures", "canaries"
    title: str
    svg: str  # the whole SVG document (no XML declaration, no DOCTYPE: it is inlined in the HTML as is)
    source: str  # what it is drawn from, for the caption


def _when(t: float) -> datetime:
    return datetime.fromtimestamp(t)


def _figure(title: str, ylabel: str):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=96, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=10, loc="left")
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _finish(fig, ax, since: float, until: float, marks: Sequence[tuple[float, str]]) -> str:
    import matplotlib.dates as mdates
    from matplotlib import rc_context

    ax.set_xlim(_when(since), _when(until))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
    top = ax.get_ylim()[1]
    for t, label in marks:
        if since <= t <= until:
            ax.axvline(_when(t), color="#7a4", linestyle=":", linewidth=1)
            ax.text(_when(t), top, f" {label}", rotation=90, va="top", ha="left", fontsize=6, color="#474")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", framealpha=0.6)
    buf = io.StringIO()
    with rc_context({"svg.fonttype": "path", "svg.hashsalt": "pdctl-incident"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return _inline(buf.getvalue())


def _inline(svg: str) -> str:
    """The SVG without its XML declaration and DOCTYPE (which belong to a file, not to an element in HTML)."""
    svg = re.sub(r"^<\?xml[^>]*\?>\s*", "", svg)
    svg = re.sub(r"^<!DOCTYPE[^>]*>\s*", "", svg, flags=re.S)
    return re.sub(r"\s*<metadata>.*?</metadata>", "", svg, count=1, flags=re.S).strip() + "\n"


def _steps(ax, series: dict[str, Points], until: float, *, style: str = "-", suffix: str = "") -> None:
    for label, pts in sorted(series.items()):
        if not pts:
            continue
        xs = [_when(t) for t, _ in pts] + [_when(until)]
        ys = [v for _, v in pts] + [pts[-1][1]]  # held until the window's end: a sample line says a change
        ax.step(xs, ys, where="post", linestyle=style, linewidth=1.4, label=f"{_short(label)}{suffix}")


def _short(label: str) -> str:
    return label.split("@", 1)[0]


def queues_chart(sig: Signals, since: float, until: float) -> Chart:
    fig, ax = _figure("Inflight queues (PD queue gauges per worker; decode running dashed)", "requests")
    _steps(ax, sig.queued, until)
    _steps(ax, sig.running, until, style="--", suffix=" running")
    ax.set_ylim(bottom=0)
    svg = _finish(fig, ax, since, until, sig.marks)
    return Chart("queues", "Inflight queues", svg, "the watch timeline's sample lines")


def failures_chart(sig: Signals, since: float, until: float) -> Chart:
    fig, ax = _figure("KV transfer failures (counter per worker as read; bootstrap dashed)", "failures")
    _steps(ax, sig.transfer_failed, until, suffix=" transfer")
    _steps(ax, sig.bootstrap_failed, until, style="--", suffix=" bootstrap")
    ax.set_ylim(bottom=0)
    svg = _finish(fig, ax, since, until, sig.marks)
    return Chart("failures", "KV transfer failures", svg, "the watch timeline's sample lines")


def canaries_chart(sig: Signals, since: float, until: float) -> Chart:
    fig, ax = _figure("Pair canaries (latency of each; failed x, unknown o at 0)", "latency (ms)")
    for pair, cs in sorted(sig.canaries.items()):
        ok = [(c.t, c.latency_s * 1000.0) for c in cs if c.status == "pass" and c.latency_s is not None]
        if ok:
            ax.plot([_when(t) for t, _ in ok], [v for _, v in ok], marker=".", linewidth=1, label=_short_pair(pair))
        bad = [c.t for c in cs if c.status == "fail"]
        if bad:
            ax.scatter(
                [_when(t) for t in bad], [0.0] * len(bad), marker="x", color="#c22", label=f"{_short_pair(pair)} failed"
            )
        unknown = [c.t for c in cs if c.status not in ("pass", "fail")]
        if unknown:
            ax.scatter(
                [_when(t) for t in unknown],
                [0.0] * len(unknown),
                marker="o",
                facecolors="none",
                edgecolors="#888",
                label=f"{_short_pair(pair)} unknown",
            )
    ax.set_ylim(bottom=0)
    svg = _finish(fig, ax, since, until, sig.marks)
    return Chart("canaries", "Pair canary latency and results", svg, "the watch timeline's pair lines")


def _short_pair(pair: str) -> str:
    return " -> ".join(_short(p) for p in pair.split(" -> "))


def incident_charts(sig: Signals, since: float, until: float) -> list[Chart]:
    """The charts the signals allow: queues and failures when there are sample lines, canaries when there are pair
    lines."""
    out = []
    if sig.queued or sig.running:
        out.append(queues_chart(sig, since, until))
    if sig.transfer_failed or sig.bootstrap_failed:
        out.append(failures_chart(sig, since, until))
    if sig.canaries:
        out.append(canaries_chart(sig, since, until))
    return out
