"""Check results as a table (or blocks when the table does not fit), a failed check as a block, and the steps."""

from __future__ import annotations

from typing import Iterable

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from pdctl.checks.result import CheckResult
from pdctl.render.layout import Col, block, grid, plain_table
from pdctl.render.screen import STATUS_STYLE

CHECK_COLS = (Col("target", ident=True, head=True), Col("check", ident=True, head=True),
              Col("status", ident=True, head=True), Col("observed"), Col("expected"), Col("detail"))
# a failed check reads "FAIL check target", then expected, found and why, whatever the width
_BLOCK_COLS = (CHECK_COLS[2], CHECK_COLS[1], CHECK_COLS[0], Col("expected"), Col("found"), Col("why"))


def status_cell(r: CheckResult) -> Text:
    return Text(r.status.value.upper(), style=STATUS_STYLE[r.status])


def check_table(title: str, results: Iterable[CheckResult], width: int | None = None) -> RenderableType:
    """Every result, one row each: a table when it fits `width` (None: always a table), else one block per check.
    Pure."""
    rows = [(r.target, r.name, status_cell(r), r.observed, r.expected, r.detail) for r in results]
    return grid(title, CHECK_COLS, rows, width if width is not None else 10 ** 6)


def check_block(r: CheckResult, width: int = 10 ** 6) -> list[RenderableType]:
    """A (failed) check as a few lines that drop nothing: `FAIL  check  target`, then expected, found and why.
    Pure."""
    return block(_BLOCK_COLS, (status_cell(r), r.name, r.target, r.expected, r.observed, r.detail), width=width)


def steps_table(steps) -> Table:
    t = plain_table("steps")
    t.add_column("step")
    t.add_column("seconds", justify="right")
    t.add_column("result")
    for s in steps:
        t.add_row(s.step, f"{s.seconds:.1f}", Text("ok" if s.ok else "failed", style="green" if s.ok else "red"))
    return t
