"""`pdctl incident`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from pdctl.cli.common import InventoryOpt, JsonOpt, handle_errors, open_deployment, progress_quiet


@handle_errors
def incident(
    inventory: InventoryOpt = None,
    timeline: Annotated[
        Optional[Path],
        typer.Option(
            "--timeline",
            metavar="FILE",
            help="The watch's timeline (`pdctl watch --timeline FILE`): verdicts, "
            "samples, canaries and heals; without it, no charts.",
        ),
    ] = None,
    since: Annotated[
        Optional[str],
        typer.Option(
            "--since",
            metavar="WHEN",
            help="Window start: an ISO time or a time ago (30m, 2h). Default: a minute "
            "before the first failing event of the last 24 h, else the last hour.",
        ),
    ] = None,
    until: Annotated[Optional[str], typer.Option("--until", metavar="WHEN", help="Window end (default now).")] = None,
    prometheus: Annotated[
        Optional[str],
        typer.Option(
            "--prometheus",
            metavar="URL",
            help="Read the alerts that fired (ALERTS) over the window from this Prometheus.",
        ),
    ] = None,
    out: Annotated[
        Optional[Path],
        typer.Option(
            "--out",
            metavar="PATH",
            help="Write PATH.md and PATH.html (charts as PATH-<chart>.svg); a directory: "
            "incident-<deployment>-<time> in it. Default: the current directory.",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Write the incident write-up, as markdown and as one self-contained HTML file.

    \b
    Examples:
      pdctl incident --timeline watch.jsonl  # the write-up, here
      pdctl incident --prometheus http://p:9090  # with its pages
      pdctl incident --since 2h --out pm/  # the last 2 h, in pm/

    From the audit log, the watch's timeline, Prometheus's alerts, a triage and a fresh final-health: what
    happened (verdict changes, pages, heals, operator actions), charts of the signals (queues, KV failures, pair
    canaries), the root cause and what was ruled out with the evidence, the deployed configuration (secrets
    masked), the verification after the fix, and who, when, which versions.

    Exit 0 written (the screen says whether the deployment is healthy now, or did not answer: the write-up is
    then made from the records alone), 2 bad input (the option or file is named), 4 refused (host key)."""
    import time

    from pdctl import render
    from pdctl.audit.records import parse_when
    from pdctl.inventory import load_inventory
    from pdctl.ops.incident import check_prometheus_url, gather_incident
    from pdctl.render.incident_files import check_writable, out_base

    now = time.time()
    start = parse_when(since, option="--since", now=now) if since is not None else None
    end = parse_when(until, option="--until", now=now) if until is not None else None
    url = check_prometheus_url(prometheus) if prometheus is not None else None
    inv = load_inventory(inventory)
    base = out_base(out, inv.name, now)
    check_writable(base)  # before a minute of reads, not after
    with open_deployment(inv, quiet=progress_quiet(json_out)) as dep:
        rep = gather_incident(dep, timeline=timeline, since=start, until=end, prometheus=url, now=now)
    written = _write(rep, base, inv)
    if json_out:
        from pdctl.render.incident_screen import incident_json
        from pdctl.secrets import inventory_secrets, mask_nested

        render.emit_json(mask_nested(incident_json(rep, written), inventory_secrets(inv)))
    else:
        from pdctl.render.incident_screen import incident_screen

        incident_screen(rep, written)


def _write(rep, base: Path, inv):
    from pdctl.render.incident_charts import incident_charts
    from pdctl.render.incident_document import compose
    from pdctl.render.incident_files import chart_path, write_all
    from pdctl.render.incident_html import html
    from pdctl.render.incident_markdown import markdown
    from pdctl.secrets import inventory_secrets

    charts = incident_charts(rep.signals, rep.window.since, rep.window.until)
    doc = compose(rep, charts, inventory_secrets(inv))
    files = {c.name: chart_path(base, c).name for c in charts}  # beside the .md, referenced by name
    return write_all(base, markdown(doc, files), html(doc), charts)
