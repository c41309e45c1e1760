"""Terminal charts: pure functions from a series to lines of text."""

from __future__ import annotations

from typing import Sequence

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
