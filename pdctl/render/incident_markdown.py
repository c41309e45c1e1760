"""The incident write-up as markdown (GitHub-flavoured: pipe tables, fenced code), from its Document. Charts are
referenced as the SVG files written beside the .md (`![title](name.svg)`), so the markdown stays readable as text
and renders with its pictures wherever the folder goes. Pure."""

from __future__ import annotations

from pdctl.render.incident_document import Code, Document, Figure, Items, Para, Table


def _cell(text: str) -> str:
    """A table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def markdown(doc: Document, chart_files: dict[str, str]) -> str:
    """The document as markdown; `chart_files`: chart name -> the SVG file name beside the .md."""
    out = [f"# {doc.title}", ""]
    out += [f"- **{k}**: {v}" for k, v in doc.stamp]
    out.append("")
    for s in doc.sections:
        out += ["#" * s.level + " " + s.title, ""]
        for b in s.blocks:
            if isinstance(b, Para):
                out += [f"**{b.text}**" if b.strong else b.text, ""]
            elif isinstance(b, Items):
                out += [f"- {x}" for x in b.items] + [""]
            elif isinstance(b, Table):
                out.append("| " + " | ".join(_cell(h) for h in b.head) + " |")
                out.append("|" + "---|" * len(b.head))
                out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in b.rows]
                out.append("")
            elif isinstance(b, Code):
                fence = "````" if "```" in b.text else "```"
                out += [fence, b.text, fence, ""]
            elif isinstance(b, Figure):
                name = chart_files.get(b.chart.name, f"{b.chart.name}.svg")
                out += [f"![{b.chart.title}]({name})", "", f"*{b.chart.title}: from {b.chart.source}.*", ""]
    return "\n".join(out).rstrip() + "\n"
