"""Tables of check results and of steps."""

from __future__ import annotations

from typing import Iterable

from rich.table import Table
from rich.text import Text

from pdctl.checks.result import CheckResult
from pdctl.render.screen import STATUS_STYLE


def check_table(title: str, results: Iterable[CheckResult]) -> Table:
    t = Table(title=title, title_justify="left", expand=False)
    t.add_column("target", no_wrap=True)
    t.add_column("check", no_wrap=True)
    for col in ("status", "observed", "expected", "detail"):
        t.add_column(col, overflow="fold")
    for r in results:
        t.add_row(r.target, r.name, Text(r.status.value.upper(), style=STATUS_STYLE[r.status]),
                  r.observed, r.expected, r.detail)
    return t


def steps_table(steps) -> Table:
    t = Table(title="steps", title_justify="left")
    t.add_column("step")
    t.add_column("seconds", justify="right")
    t.add_column("result")
    for s in steps:
        t.add_row(s.step, f"{s.seconds:.1f}", Text("ok" if s.ok else "failed", style="green" if s.ok else "red"))
    return t
