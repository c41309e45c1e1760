"""The only place that prints: rich tables, progress and charts on a console, or one JSON document on stdout.

One concept a module; this package re-exports what commands call (`from pdctl import render; render.emit_json(...)`).
Every printer gets its console through `render.console()` at call time, so one patch point (a test, a report
export) captures everything printed."""

from __future__ import annotations

# name -> the module that defines it; imported on first use, so a command pays only for the printers it calls
_HOME = {
    "STATUS_STYLE": "screen",
    "console": "screen",
    "emit_json": "screen",
    "error": "screen",
    "lines": "screen",
    "wrapped": "screen",
    "start_report": "screen",
    "warning": "screen",
    "plan_lines": "screen",
    "ProgressPrinter": "progress",
    "clear_live": "progress",
    "check_table": "tables",
    "steps_table": "tables",
    "health_report": "health",
    "next_steps": "health",
    "deploy_outcome": "deploy",
    "deploy_plan": "deploy",
    "status_table": "status",
    "status_closing": "status",
    "HISTORY_RESULT_MAX": "history",
    "history_lines": "history",
    "shorten": "history",
    "inflight_report": "inflight",
    "storm_report": "storm",
    "triage_report": "triage",
    "_STYLE": "screen",
    "lint_report": "lint",
    "pairs_report": "pairs",
    "outputs_report": "outputs",
    "watch_line": "watch_service",
}


def __getattr__(name: str):
    import importlib

    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'pdctl.render' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"pdctl.render.{home}"), "STATUS_STYLE" if name == "_STYLE" else name)
    globals()[name] = value
    return value


__all__ = [
    "STATUS_STYLE",
    "console",
    "emit_json",
    "error",
    "lines",
    "wrapped",
    "plan_lines",
    "start_report",
    "warning",
    "ProgressPrinter",
    "clear_live",
    "check_table",
    "steps_table",
    "health_report",
    "next_steps",
    "deploy_outcome",
    "deploy_plan",
    "status_table",
    "status_closing",
    "HISTORY_RESULT_MAX",
    "history_lines",
    "shorten",
    "inflight_report",
    "storm_report",
    "triage_report",
    "lint_report",
    "pairs_report",
    "watch_line",
]
