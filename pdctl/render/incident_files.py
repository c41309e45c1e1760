"""Where `pdctl incident` writes, and the writing: PATH.md and PATH.html (a directory: incident-<deployment>-<time>
in it), and each chart as PATH-<chart>.svg beside the markdown, which references them. Each file is written whole or
not at all (pdctl.safe_write: never through a link), readable by others (a write-up is passed around)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from pdctl.errors import UsageError
from pdctl.render.incident_charts import Chart

_HINT = "give --out a file name in an existing directory you can write (PATH.md and PATH.html), or a directory"


@dataclass
class Written:
    markdown: Path
    html: Path
    charts: list[Path] = field(default_factory=list)


def out_base(out: Path | None, deployment: str, now: float) -> Path:
    """The path the write-up's files are named from (no suffix). Raises UsageError naming --out when its directory
    does not exist."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    name = f"incident-{deployment}-{stamp}"
    if out is None:
        return Path.cwd() / name
    if out.is_dir():
        return out / name
    if out.suffix.lower() in (".md", ".html"):
        out = out.with_suffix("")
    if not out.parent.is_dir():
        raise UsageError(f"--out {out}: no directory {out.parent}", hint=_HINT)
    return out


def chart_path(base: Path, chart: Chart) -> Path:
    return base.with_name(f"{base.name}-{chart.name}.svg")


def check_writable(base: Path) -> None:
    """UsageError naming --out unless PATH.md and PATH.html could be written now (nothing left behind)."""
    from pdctl.safe_write import check_whole

    for suffix in (".md", ".html"):
        try:
            check_whole(base.with_name(base.name + suffix), UsageError, "--out")
        except UsageError as e:
            raise UsageError(e.message, hint=_HINT) from None


def write_all(base: Path, markdown: str, html: str, charts: list[Chart]) -> Written:
    """Write the charts, then the markdown, then the HTML. Raises UsageError naming the file that could not be."""
    from pdctl.safe_write import READABLE, write_whole

    done = Written(base.with_name(base.name + ".md"), base.with_name(base.name + ".html"))
    for c in charts:
        p = chart_path(base, c)
        write_whole(
            p, '<?xml version="1.0" encoding="utf-8" standalone="no"?>\n' + c.svg, UsageError, "--out", mode=READABLE
        )
        done.charts.append(p)
    write_whole(done.markdown, markdown, UsageError, "--out", mode=READABLE)
    write_whole(done.html, html, UsageError, "--out", mode=READABLE)
    return done
