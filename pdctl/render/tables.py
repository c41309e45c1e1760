"""Check results as a table (or blocks when the table does not fit), one row per instance with its checks, a failed
check as a block (the same failure on several instances as one block), and the steps."""

from __future__ import annotations

from typing import Iterable

from rich.console import RenderableType
from rich.padding import Padding
from rich.table import Table

from pdctl.checks.result import WORST_FIRST, CheckResult, Status
from pdctl.render.escape_controls import Text
from pdctl.render.layout import Col, block, fits, grid, pack, stacked
from pdctl.render.screen import STATUS_STYLE

CHECK_COLS = (
    Col("target", ident=True, head=True),
    Col("check", ident=True, head=True),
    Col("status", ident=True, head=True),
    Col("observed"),
    Col("expected"),
    Col("detail"),
)
# a failed check reads "FAIL check target", then expected, found and why, whatever the width
_BLOCK_COLS = (CHECK_COLS[2], CHECK_COLS[1], CHECK_COLS[0], Col("expected"), Col("found"), Col("why"))


def status_cell(r: CheckResult) -> Text:
    return Text(r.status.value.upper(), style=STATUS_STYLE[r.status])


def check_table(title: str, results: Iterable[CheckResult], width: int | None = None) -> RenderableType:
    """Every result, one row each: a table when it fits `width` (None: always a table), else one block per check.
    Pure."""
    rows = [(r.target, r.name, status_cell(r), r.observed, r.expected, r.detail) for r in results]
    return grid(title, CHECK_COLS, rows, width if width is not None else 10**6)


def check_block(r: CheckResult, width: int = 10**6) -> list[RenderableType]:
    """A (failed) check as a few lines that drop nothing: `FAIL  check  target`, then expected, found and why.
    Pure."""
    return block(_BLOCK_COLS, (status_cell(r), r.name, r.target, r.expected, r.observed, r.detail), width=width)


INSTANCE_COLS = (Col("target", ident=True, head=True), Col("status", ident=True, head=True), Col("checks"))
_WORST = WORST_FIRST


def check_item(r: CheckResult) -> Text:
    """A check inside an instance's row: '--port 30000' when it passed, else '--port: expected 30000, found 9999
    (why)' in its status's style. Pure."""
    if r.status is Status.PASS:
        return Text(f"{r.name} {r.observed}".strip())
    text = f"{r.name}: expected {r.expected or '-'}, found {r.observed or '-'}"
    return Text(text + (f" ({r.detail})" if r.detail else ""), style=STATUS_STYLE[r.status])


def instance_rows(results: Iterable[CheckResult]) -> list[tuple]:
    """One row per target, in first-seen order: the target, its worst status, its checks (failed ones first).
    Pure."""
    by: dict[str, list[CheckResult]] = {}
    for r in results:
        by.setdefault(r.target, []).append(r)
    rows = []
    for target, rs in by.items():
        worst = min((r.status for r in rs), key=_WORST.index)
        ordered = sorted(rs, key=lambda r: _WORST.index(r.status))
        rows.append((target, Text(worst.value.upper(), style=STATUS_STYLE[worst]), [check_item(r) for r in ordered]))
    return rows


def instance_table(title: str, results: Iterable[CheckResult], width: int = 10**6) -> RenderableType:
    """A layer as one row per instance (all its checks in the row): a table when it fits, else each instance's
    label and status on a line with its checks indented under it. Pure."""
    return grid(title, INSTANCE_COLS, instance_rows(results), width, narrow="stacked")


def check_groups(results: Iterable[CheckResult]) -> list[list[CheckResult]]:
    """Results of the same check with the same status and expectation, on any target, grouped in first-seen order
    (a drift on every decode is one group). Pure."""
    groups: dict[tuple, list[CheckResult]] = {}
    for r in results:
        groups.setdefault((r.layer, r.name, r.status, r.expected), []).append(r)
    return list(groups.values())


_GROUP_COLS = (Col("target", ident=True, head=True), Col("found", head=True), Col("why"))


def group_block(group: list[CheckResult], of: int = 0, width: int = 10**6) -> list[RenderableType]:
    """One check failed on several instances: `FAIL  check  on 2 of 8`, then expected once, then found (and why)
    once when every instance found the same, else one row per instance. One result: check_block. Pure."""
    if len(group) == 1:
        return check_block(group[0], width)
    r0 = group[0]
    same_why = len({r.detail for r in group}) == 1
    same_found = same_why and len({r.observed for r in group}) == 1  # else each instance says its own
    on = Text(f"on {len(group)}" + (f" of {of}" if of > len(group) else " instances"), style="dim")
    out: list[RenderableType] = list(pack([status_cell(r0), Text(r0.name), on], width))
    common = [("expected", r0.expected or "-")]
    if same_found:
        common.append(("found", r0.observed or "-"))
    if same_why and r0.detail:
        common.append(("why", r0.detail))
    if same_found:  # the targets packed whole: a pair's "prefill[1] -> decode[2]" never splits
        common.append(
            (
                "on",
                "\n".join(
                    t.plain
                    for t in pack([r.target + "," for r in group[:-1]] + [group[-1].target], width - 14, sep=" ")
                ),
            )
        )
    g = Table.grid(padding=(0, 1))
    g.add_column(no_wrap=True)
    g.add_column(overflow="fold")
    for label, value in common:
        g.add_row(Text(f"   {label + ':':<9}", style="dim"), Text(value))
    out.append(g)
    if not same_found:  # one row per instance: its label and what it found on a line, its why under it
        cols = _GROUP_COLS if not same_why else _GROUP_COLS[:2]
        rows = [(r.target, r.observed or "-", r.detail)[: len(cols)] for r in group]
        out.append(Padding(stacked("", cols, rows, width - 3), (0, 0, 0, 3)))
    return out


STEP_COLS = (Col("step", whole_words=True), Col("seconds", ident=True, right=True), Col("result", ident=True))


def steps_table(steps, width: int | None = None) -> RenderableType:
    """One row per step: a table when it fits `width` (None: the console's), else a line per step, its result and
    seconds first, the step wrapping at spaces under it. A step's words (role labels with their host) are never
    cut. Pure given width."""
    import textwrap

    from rich.console import Group

    if width is None:
        from pdctl import render

        width = render.console().width
    rows = [
        (s.step, f"{s.seconds:.1f}", Text("ok" if s.ok else "failed", style="green" if s.ok else "red")) for s in steps
    ]
    if fits(width, STEP_COLS, rows):
        return grid("steps", STEP_COLS, rows, width)
    out = [Text("steps", style="italic")]
    for step, secs, result in rows:
        lines = textwrap.wrap(
            f"{result.plain} {secs}s  {step}",
            width,
            subsequent_indent="    ",
            break_long_words=False,
            break_on_hyphens=False,
        )
        out += [Text(result.plain, style=result.style) + Text(lines[0][len(result.plain) :])]
        out += [Text(x) for x in lines[1:]]
    return Group(*out)
