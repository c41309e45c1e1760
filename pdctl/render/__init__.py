"""The only place that prints: rich tables, progress and charts on a console, or one JSON document on stdout.

One concept a module; this package re-exports what commands call (`from pdctl import render; render.emit_json(...)`).
Every printer gets its console through `render.console()` at call time, so one patch point (a test, a report
export) captures everything printed."""

from __future__ import annotations

from pdctl.render.screen import STATUS_STYLE, console, emit_json, error, lines, start_report, warning
from pdctl.render.progress import ProgressPrinter, clear_live
from pdctl.render.tables import check_table, steps_table
from pdctl.render.health import health_report, next_steps
from pdctl.render.deploy import deploy_outcome, deploy_plan
from pdctl.render.status import status_table
from pdctl.render.history import HISTORY_RESULT_MAX, history_lines, shorten
from pdctl.render.inflight import inflight_report
from pdctl.render.storm import storm_report
from pdctl.render.triage import triage_report

_STYLE = STATUS_STYLE   # the name callers used before the package

__all__ = [
    "STATUS_STYLE", "console", "emit_json", "error", "lines", "start_report", "warning", "ProgressPrinter",
    "clear_live", "check_table",
    "steps_table", "health_report", "next_steps", "deploy_outcome", "deploy_plan", "status_table",
    "HISTORY_RESULT_MAX", "history_lines", "shorten", "inflight_report", "storm_report",
    "triage_report",
]
