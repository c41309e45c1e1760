"""What `pdctl verify pairs` prints, on one screen: the verdict and the next command first, the matrix (rows
prefill, columns decode), one line per cause of the failed pairs (pairs that failed alike counted together), and
the verdict and the command again last. What does not fit 24 rows (each failed pair's room and abort, the
instances, the notes) is dropped whole and said to be; `-v` shows it all."""

from __future__ import annotations

from pdctl import render
from pdctl.checks.pairs import FAIL, PASS, UNKNOWN, PairResult
from pdctl.render.check_causes import MAX_NAMED
from pdctl.render.escape_controls import Text
from pdctl.render.fit_screen import Row, Screen, closing_rows, drawn, glued, labelled, wrapped
from pdctl.render.layout import Cell, Col, grid, pack

_CELL_STYLE = {PASS: "green", FAIL: "bold red", UNKNOWN: "yellow"}


def cell(r: PairResult | None) -> Text:
    """'pass 212ms' (KV transfer time when the engine reported one, else the decode's answer time), 'FAIL',
    'unknown'. Pure."""
    if r is None:
        return Text("FAIL (no result)", style=_CELL_STYLE[FAIL])
    if r.status != PASS:
        return Text(r.status.upper() if r.status == FAIL else r.status, style=_CELL_STYLE[r.status])
    ms = r.kv_transfer_ms if r.kv_transfer_ms is not None else r.decode_ms
    return Text("pass" + (f" {ms:.0f}ms" if ms is not None else ""), style=_CELL_STYLE[PASS])


def matrix_rows(rep) -> tuple[tuple[Col, ...], list[list[Cell]]]:
    """The matrix as columns and rows for pdctl.render.layout. Pure."""
    by = {(r.prefill, r.decode): r for r in rep.pairs}
    cols = (
        Col("", ident=True, head=True),
        *(Col(f"decode[{j}]", ident=True, right=True) for j in range(len(rep.decodes))),
    )
    rows: list[list[Cell]] = [
        [f"prefill[{i}]", *(cell(by.get((i, j))) for j in range(len(rep.decodes)))] for i in range(len(rep.prefills))
    ]
    return cols, rows


def pair_causes(pairs: list[PairResult], total: int) -> list[str]:
    """One line per distinct finding of these (failed or unknown) pairs, the pairs that share it named (up to 3) or
    counted: 'FAIL  prefill[0] -> decode[1], prefill[1] -> decode[1]: decode: connection refused'; 'FAIL  all 6
    failed pairs: ...' when one finding covers them all (the verdict names them); else 'FAIL  4 of 9 pairs
    (names): ...'. Pure."""
    by_found: dict[tuple[str, str], list[PairResult]] = {}
    for r in pairs:
        by_found.setdefault((r.status, r.found), []).append(r)
    out = []
    for (status, found), rs in by_found.items():
        word = status.upper() if status == FAIL else status
        if len(rs) <= MAX_NAMED:
            who = ", ".join(r.name for r in rs)
        elif len(by_found) == 1:  # one cause for all: the verdict line already names them
            who = f"all {len(rs)} {'failed' if status == FAIL else status} pairs"
        else:
            who = f"{len(rs)} of {total} pairs" + ("" if len(rs) == total else f" ({', '.join(r.name for r in rs)})")
        out.append(f"{word:<4}  {who}: {found or '-'}")
    return out


def pairs_screen(rep, width: int) -> Screen:
    """The whole answer as a Screen, its parts ranked for fitting 24 rows. Pure but for drawing the matrix."""
    v = rep.verdict
    word = "PASS" if v.ok else ("UNKNOWN" if rep.exit_code == 3 else "FAIL")
    style = "bold green" if v.ok else ("yellow" if word == "UNKNOWN" else "bold red")
    screen = Screen(width)
    summary = f"all {v.total} pairs failed" if len(v.failed) == v.total > 3 else v.summary  # no need to name each
    line = f"verify pairs: {word} ({summary})"
    if len(line) <= width or ": " not in summary:  # ("4 of 4 pairs pass" names no pair: printed whole)
        screen.head = wrapped(line, width, style=style)
    else:  # the names on their own lines, broken only between pairs: a pair name is never cut
        head, names = summary.split(": ", 1)
        screen.head = [Row(f"verify pairs: {word} ({head})", style)]
        listed = [f"{n}," for n in names.split(", ")[:-1]] + [names.split(", ")[-1]]
        screen.head += [Row("  " + part.plain) for part in pack(listed, width - 2, sep=" ")]
    step = _first_step(rep.next_steps)
    if step:  # the one command to run, before any detail
        screen.head += wrapped(step, width, style="yellow", first="next: ", indent=6)
    screen.add(
        wrapped(
            f"{len(rep.prefills)} prefill x {len(rep.decodes)} decode in {rep.elapsed_ms / 1000:.1f}s "
            f"(budget {rep.budget_s:g}s), straight to each pair's two workers",
            width,
            style="dim",
            first="  ",
            indent=4,
        ),
        rank=3,
        note="how it was sent",
    )
    cols, rows = matrix_rows(rep)
    label = "pass: KV transfer ms" if any(r.kv_transfer_ms is not None for r in rep.pairs) else "pass: decode answer ms"
    matrix = [
        Row(f"pairs (rows prefill, columns decode; {label})", "italic"),
        *drawn(grid("", cols, rows, width), width),
    ]
    screen.add(matrix, rank=1, note="the matrix")
    for status, title in ((FAIL, "failed pairs"), (UNKNOWN, "unknown pairs")):  # failures first: they are findings
        bad = [r for r in rep.pairs if r.status == status]
        if not bad:
            continue
        tone = _CELL_STYLE[status]
        screen.add([Row(title, "bold")], keep=True)
        for text in pair_causes(bad, len(rep.pairs)):
            screen.add(wrapped(text, width, indent=6, style=tone), keep=True)
        screen.add(
            wrapped(bad[0].expected, width, indent=12, first="  expected: ", style="dim"),
            rank=2,
            note="what was expected",
        )
        detail: list[Row] = []
        for r in bad:
            if r.room is None and not r.aborted:
                continue  # no canary was sent: nothing more to say than the cause line
            detail.append(Row(f"  {r.name}", "dim"))
            if r.room is not None:
                detail += labelled("room:", str(r.room), width, style="dim")
            if r.aborted:
                detail += labelled("aborted:", "; ".join(r.aborted), width, style="dim")
        if detail:
            screen.add(detail, rank=3, note="each pair's room and abort")
    marked = [r for r in rep.pairs if r.lineage_hazard]
    if marked:  # the canary may pass today: the hazard is that these pairs were not co-restarted
        title = "restart-lineage hazards (see `pdctl verify final-health --layer lineage`)"
        hazard_rows = wrapped(title, width, style="bold")
        for r in marked:
            hazard_rows += wrapped(f"{r.name}: {r.lineage_hazard}", width, first="  ", indent=4)
        screen.add(hazard_rows, keep=True)
    # an instance and its label kept on one line (folded only when longer than the line)
    named = [glued(f"prefill[{i}] = {lab}") for i, lab in enumerate(rep.prefills)]
    named += [glued(f"decode[{j}] = {lab}") for j, lab in enumerate(rep.decodes)]
    screen.add(wrapped(", ".join(named), width, first="instances: ", indent=2), rank=3, note="the instances")
    if rep.notes:
        notes = [row for n in rep.notes for row in wrapped(n, width, first="  note: ", indent=8, style="dim")]
        screen.add(notes, rank=3, note="notes")
    others = [s for s in rep.next_steps if s != step]
    if others:
        screen.add(wrapped("; ".join(others), width, indent=6, first="also: "), rank=2, note="other steps")
    if not v.ok or step:  # the verdict and the command again, on screen after any scroll
        screen.tail = closing_rows(f"verify pairs: {word}", step, width, style)
    return screen


def pairs_report(rep, *, verbose: bool = False) -> None:
    """One screen (24 rows) unless `verbose`: then every part."""
    from pdctl.render.fit_screen import print_rows

    screen = pairs_screen(rep, render.console().width)
    print_rows(screen.fit(10**6) if verbose else screen.fit())


def _first_step(steps: list[str]) -> str:
    """The one command to run next: after triage, the heal when one is known (`pdctl restart --pair`), else the
    first step. Pure."""
    from pdctl.checks.result import NEXT_TRIAGE

    return steps[1] if len(steps) > 1 and steps[0] == NEXT_TRIAGE else (steps[0] if steps else "")
