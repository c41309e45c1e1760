"""What `pdctl verify outputs` prints: the verdict and the next command first, then the sessions that were not
clean (a few each, the rest counted), the pairs that disagree, whether PD was used, and the verdict and the next
command again, so they are on screen after any scroll."""

from __future__ import annotations

from pdctl import render
from pdctl.checks.outputs import CORRUPT, FAILED, LATE, PASS, UNKNOWN, SessionResult
from pdctl.render.escape_controls import Text

SHOWN = 6  # sessions listed by name; more are counted
_STYLE = {CORRUPT: "bold red", FAILED: "bold red", LATE: "yellow", UNKNOWN: "yellow", PASS: "green"}


def _same_cause(sessions: list[SessionResult]) -> list[tuple[str, list[SessionResult]]]:
    """Sessions grouped by what was found, in order of first appearance (a corrupt session's parting is its own).
    Pure."""
    groups: dict[str, list[SessionResult]] = {}
    for x in sessions:
        groups.setdefault(x.found, []).append(x)
    return list(groups.items())


def _word(rep) -> tuple[str, str]:
    if rep.ok:
        return "PASS", "bold green"
    return ("UNKNOWN", "yellow") if rep.exit_code == 3 else ("FAIL", "bold red")


def outputs_report(rep) -> None:
    c = render.console()
    word, style = _word(rep)
    first, *more = rep.verdict.summary.split("; ")
    verdict = f"verify outputs: {word} ({first})"
    c.print(Text(verdict, style=style), overflow="fold")
    steps = rep.next_steps
    if steps:
        c.print(Text("next: ", style="yellow") + Text(steps[0]), overflow="fold")
    if more:
        c.print(Text("  " + "; ".join(more)), overflow="fold")
    s = rep.settings
    c.print(
        Text(
            f"  {s.sessions} session(s) x {s.turns} turn(s), {s.max_tokens} tokens greedy, at concurrency 1 then "
            f"{s.sessions}, in {rep.elapsed_s:g}s; corrupt = parts before token {s.early_tokens}"
            + (" (strict: any parting)" if s.strict else ""),
            style="dim",
        ),
        overflow="fold",
    )
    for status, title in (
        (CORRUPT, "corrupt sessions"),
        (FAILED, "sessions with a failed request"),
        (LATE, "late divergences (not counted)"),
        (UNKNOWN, "sessions not judged"),
    ):
        bad = [x for x in rep.sessions if x.status == status]
        if not bad:
            continue
        c.print(Text(f"{title}: {len(bad)}", style=_STYLE[status]))
        causes = _same_cause(bad)
        for found, group in causes[:SHOWN]:
            x = group[0]
            if len(group) > 1:  # one line per cause, its sessions counted ("not sent: session 0 failed ...")
                c.print(Text(f"  {len(group)} sessions (from session {x.session}): {found}"), overflow="fold")
                continue
            turn = "" if x.turn is None else f" turn {x.turn}"
            c.print(Text(f"  session {x.session}{turn} via {x.router}: {found}"), overflow="fold")
        if len(causes) > SHOWN:
            c.print(Text(f"  ... and {len(causes) - SHOWN} more (--json lists every one)", style="dim"))
    for p in rep.pairs:
        if p.status != PASS:
            c.print(
                Text(f"pair {p.name}: {p.status}", style=_STYLE[p.status]) + Text(f": {p.found}" if p.found else ""),
                overflow="fold",
            )
    if rep.pairs and all(p.status == PASS for p in rep.pairs):
        c.print(Text(f"pairs: each of {len(rep.pairs)} gives the reference's tokens", style="green"))
    pd = rep.pd_use
    c.print(Text(f"PD used: {pd.status}", style=_STYLE.get(pd.status, "")) + Text(f" ({pd.found})"), overflow="fold")
    for n in rep.notes:
        c.print(Text(f"  note: {n}", style="dim"), overflow="fold")
    for step in steps[1:]:
        c.print(Text("  then: ") + Text(step), overflow="fold")
    c.print(Text(verdict, style=style), overflow="fold")  # again, so it is on screen after any scroll
    if steps:
        c.print(Text("next: ", style="yellow") + Text(steps[0]), overflow="fold")
