"""What `pdctl verify pairs` prints: the verdict first, then the matrix (rows prefill, columns decode), then each
failed pair with what was expected and what was found, then which instance each row and column is."""

from __future__ import annotations

from pdctl import render
from pdctl.checks.pairs import FAIL, PASS, UNKNOWN, PairResult
from pdctl.render.escape_controls import Text
from pdctl.render.layout import Cell, Col, block, grid, pack

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


def pairs_report(rep) -> None:
    c = render.console()
    v = rep.verdict
    word = "PASS" if v.ok else ("UNKNOWN" if rep.exit_code == 3 else "FAIL")
    style = "bold green" if v.ok else ("yellow" if word == "UNKNOWN" else "bold red")
    line = f"verify pairs: {word} ({v.summary})"
    if len(line) <= c.width or ": " not in v.summary:  # ("4 of 4 pairs pass" names no pair: printed whole)
        c.print(Text(line, style=style), soft_wrap=True)
    else:  # the names on their own lines, broken only between pairs: a pair name is never cut
        head, names = v.summary.split(": ", 1)
        c.print(Text(f"verify pairs: {word} ({head})", style=style))
        for part in pack([f"{n}," for n in names.split(", ")[:-1]] + [names.split(", ")[-1]], c.width - 2, sep=" "):
            c.print(Text("  ") + part)
    step = _first_step(rep.next_steps)
    if step:  # the one command to run, before any detail
        c.print(Text("next: ", style="yellow") + Text(step))
    c.print(
        Text(
            f"  {len(rep.prefills)} prefill x {len(rep.decodes)} decode in {rep.elapsed_ms / 1000:.1f}s "
            f"(budget {rep.budget_s:g}s), straight to each pair's two workers",
            style="dim",
        )
    )
    cols, rows = matrix_rows(rep)
    label = "pass: KV transfer ms" if any(r.kv_transfer_ms is not None for r in rep.pairs) else "pass: decode answer ms"
    c.print(Text(f"pairs (rows prefill, columns decode; {label})", style="italic"))
    c.print(grid("", cols, rows, c.width))
    pcols = (
        Col("status", ident=True, head=True),
        Col("pair", ident=True, head=True),
        Col("expected"),
        Col("found"),
        Col("room"),
        Col("timeout"),
    )
    for status, title in ((FAIL, "failed pairs"), (UNKNOWN, "unknown pairs")):  # failures first: they are findings
        bad = [r for r in rep.pairs if r.status == status]
        if bad:
            c.print(Text(title, style="bold"))
        for r in bad:
            room = "" if r.room is None else str(r.room)  # no room: no canary was sent
            for shown in block(
                pcols, (cell(r), r.name, r.expected, r.found, room, "; ".join(r.aborted)), width=c.width
            ):
                c.print(shown)
    marked = [r for r in rep.pairs if r.lineage_hazard]
    if marked:  # the canary may pass today: the hazard is that these pairs were not co-restarted
        c.print(Text("restart-lineage hazards (see `pdctl verify final-health --layer lineage`)", style="bold"))
        for r in marked:
            c.print(Text(f"  {r.name}: {r.lineage_hazard}"))
    named = [f"prefill[{i}] = {lab}," for i, lab in enumerate(rep.prefills)]
    named += [f"decode[{j}] = {lab}," for j, lab in enumerate(rep.decodes)]
    named[-1] = named[-1].rstrip(",")
    for k, part in enumerate(pack(named, c.width - 11, sep=" ")):  # packed: an instance and its label never split
        c.print(Text("instances: " if k == 0 else " " * 11, style="bold" if k == 0 else "") + part)
    for n in rep.notes:
        c.print(Text(f"  note: {n}", style="dim"))
    for k, step in enumerate(rep.next_steps):  # wrapped between options, never inside one
        lead = "next: " if k == 0 else "  then, to heal: "
        words = step.replace(" --", "\0--").split("\0")
        for i, part in enumerate(pack(words, c.width - len(lead), sep=" ")):
            c.print((Text(lead, style="yellow" if k == 0 else "") if i == 0 else Text(" " * len(lead))) + part)
    if not v.ok:  # the verdict and the command again, on screen after any scroll
        from pdctl.render.fit_screen import closing

        c.print(Text(closing(f"verify pairs: {word}", step), style=style))


def _first_step(steps: list[str]) -> str:
    """The one command to run next: the heal when one is known ("then, to heal: pdctl restart --pair"), else the
    first step. Pure."""
    return steps[1] if len(steps) > 1 else (steps[0] if steps else "")
