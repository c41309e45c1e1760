"""The final-health report: the verdict first, then each failed check with what was expected and what was found
(the same failure on several instances once, with one row per instance), then the passing checks summarised per
layer (with `verbose`, one row per instance of each layer with all its checks), then what to run next."""

from __future__ import annotations

from collections import Counter

from pdctl import render
from pdctl.checks.result import CheckResult, Status
from pdctl.render.escape_controls import Text


def layer_summary(layer: str, results: list[CheckResult], pad: int = 0) -> str:
    """'flags     13/15 pass, 2 fail   4. live flags and env vs inventory' (counts padded to `pad`, so the titles
    of several layers line up). Pure."""
    from pdctl.checks.layers import layer_title

    return f"  {layer:<9} {layer_counts(results).ljust(pad)}   {layer_title(layer)}"


def layer_counts(results: list[CheckResult]) -> str:
    """'13/15 pass, 2 fail'. Pure."""
    n = Counter(r.status for r in results)
    extra = "".join(f", {n[s]} {s.value}" for s in (Status.FAIL, Status.UNKNOWN, Status.WARN, Status.SKIP) if n[s])
    counts = f"{n[Status.PASS]}/{len(results)}"
    return f"{counts:>5} pass{extra}"


def verdict(report) -> tuple[str, str, str]:
    """(the verdict line, its short form for the closing line, its style). Pure."""
    failures, unknown = report.failures(), report.unknown()
    if report.ok:
        return "final-health: PASS", "final-health: PASS", "bold green"
    if failures:
        layers = ", ".join(dict.fromkeys(r.layer for r in failures))
        return f"final-health: FAIL ({len(failures)} check(s) failed in: {layers})", "final-health: FAIL", "bold red"
    layers = ", ".join(dict.fromkeys(r.layer for r in unknown))
    line = f"final-health: UNKNOWN ({len(unknown)} check(s) could not be asked in: {layers})"
    return line, "final-health: UNKNOWN", "magenta"


def health_report(report, *, verbose: bool = False) -> None:
    """A failure without `verbose`: one screen (health_screen). Else the verdict, every failed check with its
    why, the layers (`verbose`: every check), the next steps, and the verdict again when something failed."""
    from pdctl.checks.layers import layer_title

    c = render.console()
    failures, unknown = report.failures(), report.unknown()
    steps = next_steps(report.layers)
    if not report.ok and not verbose:
        from pdctl.render.fit_screen import PROMPT_ROWS, SCREEN_ROWS, print_rows

        rows = health_screen(report, c.width, steps).fit()
        if len(rows) > SCREEN_ROWS - PROMPT_ROWS:  # the causes alone overflow: instances said by role and index
            rows = health_screen(report, c.width, steps, by_index=True).fit()
        print_rows(rows)
        return
    line, short, style = verdict(report)
    c.print(Text(line, style=style))
    warned = [r for rs in report.layers.values() for r in rs if r.status is Status.WARN]
    for heading, rs in (("failed checks", failures), ("could not be asked", unknown), ("warnings", warned)):
        if rs:
            from pdctl.render.tables import check_groups, group_block  # rich's tables: only a failure needs them

            c.print(Text(heading, style="bold"))
            for group in check_groups(rs):
                of = {r.target for r in report.layers.get(group[0].layer, []) if r.name == group[0].name}
                for part in group_block(group, len(of), c.width):
                    c.print(part)
    if verbose:
        from pdctl.render.tables import instance_table

        for layer, results in report.layers.items():
            c.print(instance_table(layer_title(layer), results, c.width))
    else:
        c.print(Text("layers", style="bold"))
        pad = max((len(layer_counts(rs)) for rs in report.layers.values()), default=0)
        for layer, results in report.layers.items():
            c.print(Text(layer_summary(layer, results, pad)))
    if report.baseline is not None:  # --record-baseline: where it went, or that it did not (failed checks say why)
        c.print(
            Text(report.baseline.summary, style="green" if report.baseline.recorded else "bold red"), soft_wrap=True
        )  # one line, never folded inside its path: copied whole
    for step in steps:
        c.print(Text("next: ", style="yellow") + Text(step))
    if not report.ok:
        from pdctl.render.fit_screen import closing

        c.print(Text(closing(short, steps[0] if steps else ""), style=style))


def next_steps(layers) -> list[str]:
    """What to run next for final-health's results (layer -> checks): triage's recommendation from the same results
    first, then the failed checks' own next steps (a typed field each check sets), once each. Pure."""
    from pdctl.checks.recommend import next_steps as recommended

    return recommended(layers)


def health_screen(report, width: int, steps: list[str], *, by_index: bool = False):
    """A failing final-health as one screen (render.fit_screen): the verdict and the next command; each cause on a
    line (instances counted; `by_index`: more than 3 said as "decode[0-3]", not host by host), its why under it
    while rows last; the warnings, the layer counts and the other next
    steps while rows last; the verdict and the next command again. Pure."""
    from pdctl.render.check_causes import cause_line, cause_why, causes
    from pdctl.render.fit_screen import Row, Screen, closing_rows, wrapped

    line, short, style = verdict(report)
    screen = Screen(width)
    screen.head = wrapped(line, width, style=style)
    if steps:
        screen.head += wrapped(steps[0], width, style="yellow", first="next: ", indent=6)
    warned = [r for rs in report.layers.values() for r in rs if r.status is Status.WARN]
    for heading, rs, tone in (
        ("failed checks", report.failures(), "red"),
        ("could not be asked", report.unknown(), "magenta"),
    ):
        if not rs:
            continue
        screen.add([Row(heading, "bold")], keep=True)
        for cause in causes(rs):
            of = len({r.target for r in report.layers.get(cause.first.layer, []) if r.name == cause.first.name})
            screen.add(wrapped(cause_line(cause, of, by_index=by_index), width, indent=6, style=tone), keep=True)
            why = cause_why(cause)
            if why:
                screen.add(wrapped(why, width, indent=11, first="      why: ", style="dim"), rank=2, note="why")
    if warned:
        rows = [Row("warnings", "bold")]
        for cause in causes(warned):
            rows += wrapped(cause_line(cause), width, indent=6, style="yellow")
        screen.add(rows, rank=3, note=f"{len(warned)} warning(s)")
    counts = ", ".join(f"{layer} {layer_counts(rs).split(' pass')[0].strip()}" for layer, rs in report.layers.items())
    screen.add(wrapped(counts, width, indent=8, first="layers: "), rank=1, note="the layer counts")
    if report.baseline is not None:
        tone = "green" if report.baseline.recorded else "bold red"
        screen.add(wrapped(report.baseline.summary, width, style=tone), keep=True)
    if len(steps) > 1:
        others = "; ".join(steps[1:])
        screen.add(wrapped(others, width, indent=6, style="yellow", first="also: "), rank=2, note="other steps")
    screen.tail = closing_rows(short, steps[0] if steps else "", width, style)
    return screen
