"""The incident write-up as one self-contained HTML file, from its Document: its style inline, its charts inline
SVG (text drawn as paths), no script, no font, no image or anything else fetched from a network; long lines wrap
(pre blocks and table cells alike); stamped at the top with the time, deployment, operator and pdctl version. Pure."""

from __future__ import annotations

from html import escape

from pdctl.render.incident_document import Code, Document, Figure, Items, Para, Table

STYLE = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 72em; padding: 0 1em; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; border-bottom: 2px solid #444; padding-bottom: .2em; }
h2 { font-size: 1.3em; margin-top: 1.6em; border-bottom: 1px solid #bbb; padding-bottom: .15em; }
.stamp { background: #f3f3f3; border: 1px solid #ccc; padding: .5em .8em; }
.stamp dt { font-weight: bold; float: left; clear: left; width: 7em; }
.stamp dd { margin-left: 7.5em; overflow-wrap: anywhere; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f6f6; border: 1px solid #ddd; padding: .6em; }
code { white-space: pre-wrap; overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .2em .4em; text-align: left; vertical-align: top;
  white-space: pre-wrap; overflow-wrap: break-word; word-break: break-word; }
th { background: #eee; }
figure { margin: 1em 0; }
figure svg { max-width: 100%; height: auto; }
figcaption { font-size: .85em; color: #555; }
"""


def html(doc: Document) -> str:
    """The document as HTML; charts inline."""
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(doc.title)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{escape(doc.title)}</h1>",
        '<dl class="stamp">' + "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in doc.stamp) + "</dl>",
    ]
    for s in doc.sections:
        anchor = s.title.lower().replace(" ", "-")
        out.append(f'<section id="{escape(anchor)}"><h{s.level}>{escape(s.title)}</h{s.level}>')
        for b in s.blocks:
            if isinstance(b, Para):
                out.append(f"<p><strong>{escape(b.text)}</strong></p>" if b.strong else f"<p>{escape(b.text)}</p>")
            elif isinstance(b, Items):
                out.append("<ul>" + "".join(f"<li>{escape(x)}</li>" for x in b.items) + "</ul>")
            elif isinstance(b, Table):
                head = "".join(f"<th>{escape(h)}</th>" for h in b.head)
                rows = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in b.rows)
                out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
            elif isinstance(b, Code):
                out.append(f"<pre><code>{escape(b.text)}</code></pre>")
            elif isinstance(b, Figure):
                out.append(
                    f'<figure class="chart" id="chart-{escape(b.chart.name)}">{b.chart.svg}'
                    f"<figcaption>{escape(b.chart.title)}: from {escape(b.chart.source)}.</figcaption></figure>"
                )
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
