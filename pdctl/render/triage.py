"""What `pdctl triage` prints: the headline, the findings (one line per instance observed, wrapped under itself),
then the observations that did not pass as one row per kind and instance, and the passing ones counted."""

from __future__ import annotations

from rich.table import Table

from pdctl import render
from pdctl.checks.result import WORST_FIRST, Status
from pdctl.render.escape_controls import Text
from pdctl.render.inflight import style_of
from pdctl.render.layout import Col, grid, wrap_keeping_commands
from pdctl.render.screen import STATUS_STYLE

OBS_COLS = (
    Col("what", ident=True, head=True),
    Col("target", ident=True, head=True),
    Col("status", ident=True, head=True),
    Col("observed"),
)
_WORST = WORST_FIRST


def _finding_lines(f, width: int) -> Table:
    """observed / inferred / action lines of a finding, each value wrapped under itself."""
    g = Table.grid(padding=(0, 1))
    g.add_column(no_wrap=True)
    g.add_column(overflow="fold")
    rows = (
        [("observed:", o, "") for o in f.observed]
        + [("inferred:", o, "dim") for o in f.inferred]
        + [("ruled out:", o, "") for o in f.ruled_out]
        + [("action:", f.action, "bold")]
    )
    for label, value, style in rows:
        g.add_row(
            Text(f"  {label:<10}", style=style), Text("\n".join(wrap_keeping_commands(value, width - 13)), style=style)
        )
    return g


def grouped_observations(observations) -> list[tuple]:
    """One row per kind and target, in first-seen order: its worst status, what each observation saw. Pure."""
    by: dict[tuple[str, str], list] = {}
    for o in observations:
        by.setdefault((o.what, o.target), []).append(o)
    rows = []
    for (what, target), os_ in by.items():
        worst = min((o.status for o in os_), key=_WORST.index)
        rows.append((what, target, Text(worst.value.upper(), style=STATUS_STYLE[worst]), [o.observed for o in os_]))
    return rows


def triage_report(rep, *, verbose: bool = False) -> None:
    """Without `verbose`, one screen (triage_screen). With it: the headline and the next command first, then each
    finding (observed, inferred, ruled out, the action), then every observation, and the headline again."""
    from pdctl.checks.triage_finding import recommended_step
    from pdctl.render.fit_screen import closing, print_rows

    c = render.console()
    step = recommended_step(rep.findings)
    if not verbose:
        print_rows(triage_screen(rep, c.width, step).fit())
        return
    ok = True if not rep.findings else (False if rep.needs_action else None)
    c.print(Text(rep.headline, style=style_of(ok)))
    if step:
        c.print(Text("next: ", style="yellow") + Text(step))
    for i, f in enumerate(rep.findings, 1):
        style = "bold red" if f.severity == "action" else "yellow"
        c.print(Text(f"finding {i} [{f.severity}]: {f.title}", style=style))
        c.print(_finding_lines(f, c.width))
    shown = [o for o in rep.observations if verbose or o.status is not Status.PASS]
    if shown:
        c.print(
            grid(
                "observations" if verbose else "observations that did not pass",
                OBS_COLS,
                grouped_observations(shown),
                c.width,
                narrow="stacked",
            )
        )
    if rep.findings:
        c.print(Text(closing(_short(rep.headline), step), style=style_of(ok)))


def _short(headline: str) -> str:
    """'triage: ACTION NEEDED' from 'triage: ACTION NEEDED (2 finding(s))'. Pure."""
    return headline.split(" (", 1)[0]


def triage_screen(rep, width: int, step: str):
    """Triage on one screen (render.fit_screen): the headline and the next command; each finding's title, what it
    rules out and its action always, its observed and inferred lines while rows last; what did not pass and what
    passed, in a line each; the headline and the next command again. Pure."""
    from pdctl.render.fit_screen import Row, Screen, closing_rows, labelled, wrapped

    ok = True if not rep.findings else (False if rep.needs_action else None)
    style = style_of(ok)
    screen = Screen(width)
    screen.head = wrapped(rep.headline, width, style=style)
    if step:
        screen.head += wrapped(step, width, style="yellow", first="next: ", indent=6)
    for i, f in enumerate(rep.findings, 1):
        tone = "bold red" if f.severity == "action" else "yellow"
        screen.add(wrapped(f"{i}. [{f.severity}] {f.title}", width, indent=3, style=tone), keep=True)
        for k, o in enumerate(f.observed):
            # the first two observations carry the finding; the rest go first when rows run short
            screen.add(labelled("observed:", o, width), rank=2 if k < 2 else 3, note="observations")
        for k, o in enumerate(f.inferred):
            screen.add(labelled("inferred:", o, width, style="dim"), rank=2 if k == 0 else 4, note="inferences")
        for o in f.ruled_out:
            screen.add(labelled("ruled out:", o, width), rank=1, note="what was ruled out")
        screen.add(labelled("action:", f.action, width, style="bold"), keep=True)
    failed = grouped_observations([o for o in rep.observations if o.status is not Status.PASS])
    if failed:
        seen = "; ".join(f"{what} {target}" if target else what for what, target, *_ in failed)
        screen.add(wrapped(seen, width, indent=6, first="not passed: "), rank=2, note="what did not pass")
    passed = passed_summary(rep.observations, width)
    screen.add([Row(line, "dim") for line in passed], rank=3, note="what passed")
    if rep.findings:
        screen.tail = closing_rows(_short(rep.headline), step, width, style)
    return screen


def passed_summary(observations, width: int = 80) -> list[str]:
    """'passed: service 3/3, health 4/4, ...' in lines that fit `width`, kinds in first-seen order; a kind and
    its count never split. Pure."""
    seen: dict[str, list[int]] = {}
    for o in observations:
        n = seen.setdefault(o.what, [0, 0])
        n[0] += o.status is Status.PASS
        n[1] += 1
    parts = [f"{what} {p}/{t}" for what, (p, t) in seen.items() if p]
    lines, cur = [], "passed:"
    for part in parts:
        if len(cur) + len(part) + 2 > width and cur != "passed:":
            lines.append(cur.rstrip(","))
            cur = "       "
        cur += f" {part},"
    if parts:
        lines.append(cur.rstrip(","))
    return lines
