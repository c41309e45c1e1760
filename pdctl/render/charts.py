"""Terminal charts: pure functions from a series to lines of text."""

from __future__ import annotations

from typing import Sequence

BARS = " ▁▂▃▄▅▆▇█"  # eighths of a cell, for the chart columns


def _num(v: float) -> str:
    return f"{v:.0f}" if float(v).is_integer() else f"{v:.1f}"


def bucket(values: Sequence[float | None], columns: int) -> tuple[list[float | None], int]:
    """At most `columns` points: consecutive samples grouped k to a column, each column the group's maximum (a
    peak must show: one stuck request in a bucket of zeros is the finding); a group with no sample is None.
    Returns the points and k. Pure."""
    columns = max(1, columns)
    k = max(1, -(-len(values) // columns))
    out: list[float | None] = []
    for i in range(0, len(values), k):
        got = [v for v in values[i : i + k] if v is not None]
        out.append(max(got) if got else None)
    return out, k


def vertical_chart(
    values: Sequence[float | None],
    times: Sequence[float] | None = None,
    *,
    width: int = 60,
    height: int = 5,
    title: str = "",
) -> list[str]:
    """A column chart: a y-axis labelled 0..max, one column per sample (samples bucketed by their maximum when
    there are more than fit in `width`, and the title says so), x labels in seconds under the axis. A missing
    sample is '·' on the axis; a zero is an empty column. Every chart line fits `width` (the title may not). Pure."""
    vals = [v for v in values if v is not None]
    top = max(vals) if vals else 0.0
    lw = max(len(_num(top)), 1)
    cols = max(1, width - lw - 2)
    points, k = bucket(list(values), cols)
    head = f"{title}: max {_num(top)}; {len(values)} samples" + (f", {k} a column (their max)" if k > 1 else "")
    lines = [head]
    if top <= 0:
        height = 0  # all zero (or nothing sampled): the axis alone says it
    for row in range(height, 0, -1):
        label = _num(top) if row == height else ""
        cells = []
        for v in points:
            if v is None or v <= 0 or top <= 0:
                cells.append(" ")
                continue
            eighths = max(1, round(8 * height * v / top))
            cells.append(BARS[max(0, min(8, eighths - 8 * (row - 1)))])
        lines.append(f"{label.rjust(lw)} │{''.join(cells)}".rstrip())
    axis = "".join("·" if v is None else "─" for v in points)
    lines.append(f"{'0'.rjust(lw)} └{axis}")
    if times:
        xs = _x_labels([times[i] for i in range(0, len(times), k)], len(points))
        lines.append(" " * (lw + 2) + xs + (" s" if lw + 2 + len(xs) + 2 <= width else ""))
    return lines


def _x_labels(times: Sequence[float], n: int) -> str:
    """Seconds under the columns: one label every few columns, never overlapping. Pure."""
    row = [" "] * n
    free = 0
    for i, t in enumerate(times[:n]):
        s = _num(round(t, 1))
        if i >= free and i + len(s) <= n:
            row[i : i + len(s)] = s
            free = i + len(s) + 3
    return "".join(row).rstrip()
