"""Pieces every report section uses: HTML tables, figures as inline SVG with their source
written under them, and the sentence that says which runs a figure comes from."""
import html
import io
import os
import string
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # no display: figures are rendered to SVG text
import matplotlib.pyplot as plt  # noqa: E402

TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "template.html")


@dataclass
class Section:
    anchor: str  # id of the <section>, for the table of contents
    title: str
    body: str    # HTML


def esc(value):
    return html.escape(str(value))


def number(value, digits=3):
    """A figure for a table: None as an em dash, large values with thousands separators."""
    if value is None:
        return "\u2014"
    if isinstance(value, float):
        return f"{value:,.{digits}g}" if abs(value) < 10 ** digits else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def table(headers, rows, css_class=""):
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="{css_class}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def paragraph(text):
    return f"<p>{esc(text)}</p>"


def no_data(what, how):
    """Said instead of a figure when the database has nothing to draw: what is missing and the
    command that would measure it."""
    return f'<p class="nodata">Not measured yet: {esc(what)}. To measure: <code>{esc(how)}</code></p>'


def new_figure(width=7.0, height=3.6, columns=1, **options):
    """(figure, axes): one axes, or a row of `columns` of them."""
    return plt.subplots(1, columns, figsize=(width, height), layout="constrained", **options)


def figure(fig, title, source):
    """The figure as inline SVG inside <figure>, its source (runs or model) in the caption."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    plt.close(fig)
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg"):]  # drop the XML prolog and doctype: not allowed inside HTML
    return (f'<figure class="plot" data-title="{esc(title)}">{svg}'
            f"<figcaption><b>{esc(title)}.</b> Source: {esc(source)}</figcaption></figure>")


def runs_source(runs, results):
    """Where a set of results was measured: each run's host, commit, date and command."""
    ids = sorted({r["run_id"] for r in results})
    parts = []
    for run_id in ids:
        run = runs[run_id]
        parts.append(f"run {run_id} on {run['host']} ({run.get('cpu_model') or 'cpu unknown'}), "
                     f"commit {run.get('git_commit') or 'unknown'}, {run['started_at']}: {run['command']}")
    return "measured, " + "; ".join(parts) if parts else "no runs"


def render(title, subtitle, sections):
    with open(TEMPLATE) as f:
        template = string.Template(f.read())
    toc = "".join(f'<li><a href="#{s.anchor}">{esc(s.title)}</a></li>' for s in sections)
    body = "".join(f'<section id="{s.anchor}"><h2>{esc(s.title)}</h2>{s.body}</section>' for s in sections)
    return template.substitute(title=esc(title), subtitle=esc(subtitle), toc=toc, body=body)
