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


def health_report(report, *, verbose: bool = False) -> None:
    from pdctl.checks.layers import layer_title

    c = render.console()
    failures, unknown = report.failures(), report.unknown()
    if report.ok:
        c.print(Text("final-health: PASS", style="bold green"))
    elif failures:
        layers = ", ".join(dict.fromkeys(r.layer for r in failures))
        c.print(Text(f"final-health: FAIL ({len(failures)} check(s) failed in: {layers})", style="bold red"))
    else:
        layers = ", ".join(dict.fromkeys(r.layer for r in unknown))
        c.print(
            Text(f"final-health: UNKNOWN ({len(unknown)} check(s) could not be asked in: {layers})", style="magenta")
        )
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
    for step in next_steps(failures):
        c.print(Text("next: ", style="yellow") + Text(step))


def next_steps(failures: list[CheckResult]) -> list[str]:
    """What to run next: the failed checks' own next steps (a typed field each check sets), in order, once each."""
    return list(dict.fromkeys(r.next_step for r in failures if r.next_step))
