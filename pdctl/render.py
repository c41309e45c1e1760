"""The only place that prints: rich tables and progress on the console, or one JSON document on stdout."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Iterable

from rich.console import Console
from rich.table import Table
from rich.text import Text

from pdctl.checks.result import CheckResult, Status
from pdctl.progress import Event

_STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim"}


def console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    if os.environ.get("COLUMNS", "").isdigit():
        width: int | None = int(os.environ["COLUMNS"])
    else:
        # Piped into a file or a pager: rich would assume 80 columns and fold every table cell.
        width = None if stream.isatty() else 160
    return Console(stderr=stderr, width=width, highlight=False, soft_wrap=False)


def emit_json(doc: Any) -> None:
    """Exactly one JSON document on stdout, nothing else."""
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    sys.stdout.flush()


def error(message: str, hint: str | None = None, code: int | None = None) -> None:
    from pdctl.secrets import mask_text

    message, hint = mask_text(message), (mask_text(hint) if hint else hint)
    c = console(stderr=True)
    c.print(Text("error: ", style="bold red") + Text(message))
    if hint:
        c.print(Text("hint: ", style="yellow") + Text(hint))


def warning(message: str) -> None:
    """A warning on stderr (e.g. an abandoned lock taken over): said, but not an error."""
    from pdctl.secrets import mask_text

    console(stderr=True).print(Text("warning: ", style="yellow") + Text(mask_text(message)))


class ProgressPrinter:
    """A progress sink writing one line per step (and a throttled line per wait) to stderr."""

    def __init__(self, quiet: bool = False):
        self.c = console(stderr=True)
        self.quiet = quiet
        self._last_wait = 0.0

    def __call__(self, ev: Event) -> None:
        if self.quiet:
            return
        if ev.kind == "step":
            self.c.print(Text("  -> ", style="cyan") + Text(ev.what))
        elif ev.kind == "done":
            self.c.print(Text("  ok ", style="green") + Text(f"{ev.what} ({ev.elapsed:.1f}s)"))
        elif ev.kind == "failed":
            self.c.print(Text("  !! ", style="bold red") + Text(f"{ev.what} failed after {ev.elapsed:.1f}s: {ev.detail}"))
        elif ev.kind == "waiting":
            now = time.monotonic()
            if now - self._last_wait >= 2.0:
                self._last_wait = now
                limit = f"/{ev.limit:.0f}s" if ev.limit else ""
                self.c.print(Text(f"     waiting for {ev.what}: {ev.elapsed:.0f}s{limit}" +
                                  (f" ({ev.detail})" if ev.detail else ""), style="dim"))
        elif ev.kind == "info":
            self.c.print(Text(f"     {ev.what}" + (f": {ev.detail}" if ev.detail else ""), style="dim"))


def check_table(title: str, results: Iterable[CheckResult]) -> Table:
    t = Table(title=title, title_justify="left", expand=False)
    t.add_column("target", no_wrap=True)
    t.add_column("check", no_wrap=True)
    for col in ("status", "observed", "expected", "detail"):
        t.add_column(col, overflow="fold")
    for r in results:
        t.add_row(r.target, r.name, Text(r.status.value.upper(), style=_STYLE[r.status]),
                  r.observed, r.expected, r.detail)
    return t


def health_report(report) -> None:
    from pdctl.checks.layers import layer_title

    c = console()
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


def steps_table(steps) -> Table:
    t = Table(title="steps", title_justify="left")
    t.add_column("step")
    t.add_column("seconds", justify="right")
    t.add_column("result")
    for s in steps:
        t.add_row(s.step, f"{s.seconds:.1f}", Text("ok" if s.ok else "failed", style="green" if s.ok else "red"))
    return t


def deploy_plan(plan) -> None:
    from pdctl.secrets import mask_argv, mask_env
    from pdctl.shell import quote_argv

    c = console()
    for r in plan.roles:
        state = ("changed" if r.changed else "unchanged") + (", running" if r.running else ", not running")
        c.print(Text(f"{r.label}  service {r.service}  [{state}]", style="bold"))
        env = mask_env(r.env)
        if env:
            c.print(Text("  env: " + " ".join(f"{k}={v}" for k, v in env.items())), soft_wrap=True)
        # soft_wrap: a command line stays one line, so it can be copied or grepped whatever the width
        c.print(Text("  " + quote_argv(mask_argv(r.argv))), soft_wrap=True)
        for change in r.changes:
            c.print(Text(f"  change: {change}", style="yellow"))
    c.print(Text(f"action: {plan.action} ({plan.reason})", style="bold"))


def deploy_outcome(plan, steps) -> None:
    """After a deploy ran: what it did, in one line, then its steps."""
    c = console()
    if plan.action == "none":
        c.print(Text(f"deploy: nothing to do ({plan.reason})", style="bold"))
        return
    c.print(Text(f"deploy: co-restarted prefill -> decode -> router ({plan.reason})", style="bold"))
    for r in plan.roles:
        for change in r.changes:
            c.print(Text(f"  {r.label}: {change}", style="yellow"), soft_wrap=True)
    if steps:
        c.print(steps_table(steps))


def status_table(rows: list[dict[str, Any]]) -> None:
    t = Table(title="roles", title_justify="left")
    t.add_column("role", no_wrap=True)
    t.add_column("service", no_wrap=True)
    for col in ("state", "pid", "uptime", "detail"):
        t.add_column(col)
    for r in rows:
        if r.get("error"):
            state = Text("unknown", style="yellow")   # not "stopped": the host could not be asked
        else:
            state = Text("running", style="green") if r["active"] else Text("stopped", style="red")
        up = f"{r['uptime_s']:.0f}s" if r.get("uptime_s") is not None else ""
        t.add_row(r["label"], r["service"], state, str(r["pid"] or ""), up, r.get("detail") or "")
    console().print(t)


def lines(items: Iterable[str], style: str | None = None) -> None:
    c = console()
    for s in items:
        c.print(Text(s, style=style or ""))


# -- history --------------------------------------------------------------------------------------------------------

HISTORY_RESULT_MAX = 80
_HISTORY_STYLE = {"ok": "green", "failed": "red", "refused": "yellow", "unreachable": "red", "usage": "red",
                  "interrupted": "yellow", "unfinished": "bold yellow", "taken over": "yellow"}


def shorten(text: str, limit: int = HISTORY_RESULT_MAX) -> str:
    """The first sentence (or line) of `text`, at most `limit` characters, `…` when cut. Pure."""
    import re

    text = text.strip()
    first = re.split(r"\n|(?<=[.!?])\s", text, maxsplit=1)[0].strip()
    cut = first != text
    if len(first) > limit:
        first, cut = first[:limit - 1].rstrip(), True
    return first + ("…" if cut else "")


def history_lines(lines: list, *, filters: list[str] | None = None, log: str = "") -> None:
    """The audit log (pdctl.audit lines), one table row per line (the full result is in --json)."""
    from pdctl.audit import CorruptLine, fold_runs, result_word

    c = console()
    lines = fold_runs(lines)    # a run once, by its end; a start alone is a run that never finished
    if not lines:
        if filters:
            c.print(Text("no records match " + " ".join(filters), style="dim"))
        else:
            c.print(Text("no records yet" + (f" (log: {log})" if log else ""), style="dim"))
        return
    rows = []
    for r in lines:
        if isinstance(r, CorruptLine):
            rows.append(("", "", Text("CORRUPT LINE", style="bold red"),
                         Text(shorten(r.text.replace("\n", " ")), style="red"), "", ""))
            continue
        word, detail = result_word(r)
        cell = Text(word, style=_HISTORY_STYLE.get(word, "")) + \
            Text(f": {shorten(detail, HISTORY_RESULT_MAX - len(word) - 2)}" if detail else "")
        dur = r.get("duration_s")
        rows.append((str(r.get("time", "")), str(r.get("operator", "")), str(r.get("action", "")), cell,
                     f"{dur:.1f}" if isinstance(dur, (int, float)) else "", str(r.get("inventory", ""))))
    cols = ("time", "operator", "action", "result", "seconds", "inventory")
    widths = [max([len(col)] + [len(x.plain if isinstance(x, Text) else x) for x in column])
              for col, column in zip(cols, zip(*rows))]
    # One line per record: nothing wraps. When the table is wider than the terminal, the inventory (cut on the
    # left: the file name stays), action and result columns give way; time, operator and seconds keep their width.
    spare = c.width - (3 * len(cols) + 1) - sum(widths)
    for k, floor in ((5, 16), (2, 12), (3, 24)):
        if spare >= 0:
            break
        give = min(-spare, max(0, widths[k] - floor))
        widths[k] -= give
        spare += give
    t = Table(title="audit log", title_justify="left")
    for col, w in zip(cols, widths):
        t.add_column(col, no_wrap=True, overflow="ellipsis", width=w, justify="right" if col == "seconds" else "left")
    for row in rows:
        inv = row[5]
        if len(inv) > widths[5] > 1:
            inv = "…" + inv[len(inv) - widths[5] + 1:]
        t.add_row(*row[:5], inv)
    c.print(t)
