"""The final-health report: every layer, the verdict and what to run next."""

from __future__ import annotations

from rich.text import Text

from pdctl import render
from pdctl.checks.result import CheckResult
from pdctl.render.tables import check_table


def health_report(report) -> None:
    from pdctl.checks.layers import layer_title

    c = render.console()
    for layer, results in report.layers.items():
        c.print(check_table(layer_title(layer), results))
    if report.ok:
        c.print(Text("final-health: PASS", style="bold green"))
        return
    failures = report.failures()
    layers = ", ".join(dict.fromkeys(r.layer for r in failures))
    c.print(Text(f"final-health: FAIL ({len(failures)} check(s) failed in: {layers})", style="bold red"))
    for step in next_steps(failures):
        c.print(Text("next: ", style="yellow") + Text(step))


def next_steps(failures: list[CheckResult]) -> list[str]:
    """What to run next: the failed checks' own next steps, in order, once each; when none names one and every
    health/e2e failure is a refused or failed connection, look at the roles first."""
    from pdctl.checks.result import NEXT_STATUS

    steps = [r.next_step for r in failures if r.next_step]
    if not steps and failures and all(r.layer == "health" or "refused" in r.observed for r in failures
                                      if r.layer in ("health", "e2e")):
        steps.append(NEXT_STATUS)
    return list(dict.fromkeys(steps))
