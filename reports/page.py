"""Pieces every report section uses: HTML tables, figures as inline SVG with their source
written under them, and the sentence that says which runs a figure comes from. The HTML is in
jinja2 templates (template.html: the page; fragments.html: tables, paragraphs, figures), which
escape every value they are given except those passed as Markup: a section's body, a table's
cells and a figure's SVG, which are HTML built here or by the sections, whose data esc() escapes."""
import io
import os
from dataclasses import dataclass

import jinja2
import matplotlib
from markupsafe import Markup, escape

matplotlib.use("Agg")  # no display: figures are rendered to SVG text
import matplotlib.pyplot as plt  # noqa: E402

TEMPLATES = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.dirname(os.path.abspath(__file__))),
                               autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
FRAGMENTS = TEMPLATES.get_template("fragments.html").module


@dataclass
class Section:
    anchor: str  # id of the <section>, for the table of contents
    title: str
    body: str    # HTML


def esc(value):
    """value as HTML text, for the sections' own HTML (a plain str, so that concatenating it with
    other HTML strings escapes nothing twice)."""
    return str(escape(value))


def number(value, digits=3):
    """A figure for a table: None as an em dash, large values with thousands separators."""
    if value is None:
        return "\u2014"
    if isinstance(value, float):
        return f"{value:,.{digits}g}" if abs(value) < 10 ** digits else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def table(headers, rows, css_class=""):
    """headers: text; rows: lists of cells, each HTML (the caller escapes its data with esc)."""
    return str(FRAGMENTS.table(headers, [[Markup(cell) for cell in row] for row in rows], css_class))


def paragraph(text):
    return str(FRAGMENTS.paragraph(text))


def no_data(what, how):
    """Said instead of a figure when the database has nothing to draw: what is missing and the
    command that would measure it."""
    return str(FRAGMENTS.no_data(what, how))


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
    return str(FRAGMENTS.figure(title, Markup(svg), source))


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
    sections = [Section(s.anchor, s.title, Markup(s.body)) for s in sections]
    return TEMPLATES.get_template("template.html").render(title=title, subtitle=subtitle, sections=sections)
