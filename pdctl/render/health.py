"""The final-health report: the verdict first, then each failed check with what was expected and what was found,
then the passing checks summarised per layer (every check's row with `verbose`), then what to run next."""

from __future__ import annotations

from collections import Counter

from rich.text import Text

from pdctl import render
from pdctl.checks.result import CheckResult, Status
from pdctl.render.tables import check_block, check_table


def layer_summary(layer: str, results: list[CheckResult]) -> str:
    """'flags     13/15 pass, 2 fail   4. live flags and env vs inventory'. Pure."""
    from pdctl.checks.layers import layer_title

    n = Counter(r.status for r in results)
    extra = "".join(f", {n[s]} {s.value}" for s in (Status.FAIL, Status.WARN, Status.SKIP) if n[s])
    counts = f"{n[Status.PASS]}/{len(results)}"
    return f"  {layer:<9} {counts:>5} pass{extra}   {layer_title(layer)}"


def health_report(report, *, verbose: bool = False) -> None:
    from pdctl.checks.layers import layer_title

    c = render.console()
    failures = report.failures()
    if report.ok:
        c.print(Text("final-health: PASS", style="bold green"))
    else:
        layers = ", ".join(dict.fromkeys(r.layer for r in failures))
        c.print(Text(f"final-health: FAIL ({len(failures)} check(s) failed in: {layers})", style="bold red"))
    warned = [r for rs in report.layers.values() for r in rs if r.status is Status.WARN]
    for heading, rs in (("failed checks", failures), ("warnings", warned)):
        if rs:
            c.print(Text(heading, style="bold"))
            for r in rs:
                for part in check_block(r, c.width):
                    c.print(part)
    if verbose:
        for layer, results in report.layers.items():
            c.print(check_table(layer_title(layer), results, c.width))
    else:
        c.print(Text("layers", style="bold"))
        for layer, results in report.layers.items():
            c.print(Text(layer_summary(layer, results)))
    for step in next_steps(failures):
        c.print(Text("next: ", style="yellow") + Text(step))


def next_steps(failures: list[CheckResult]) -> list[str]:
    """What to run next: the failed checks' own next steps (a typed field each check sets), in order, once each."""
    return list(dict.fromkeys(r.next_step for r in failures if r.next_step))
