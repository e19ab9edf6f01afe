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
from matplotlib import ticker  # noqa: E402

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


def log_axis(ax, axis="x"):
    """A log scale whose labels never run into each other: at most four labelled decades, and
    within a view of less than one decade the 2s and 5s labelled instead (matplotlib labels every
    minor tick there, which overlap in a narrow axes)."""
    scale = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    scale.set_major_locator(ticker.LogLocator(base=10, numticks=4))
    scale.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    low, high = sorted(scale.get_view_interval())
    if low > 0 and high / low < 10:
        scale.set_minor_locator(ticker.LogLocator(base=10, subs=(2.0, 5.0)))
        scale.set_minor_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    else:
        scale.set_minor_formatter(ticker.NullFormatter())
    ax.tick_params(axis=axis, which="both", labelsize=7)


def figure(fig, title, source):
    """The figure as inline SVG inside <figure>, its source (runs or model) in the caption."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    plt.close(fig)
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg"):]  # drop the XML prolog and doctype: not allowed inside HTML
    return str(FRAGMENTS.figure(title, Markup(svg), source))


def test_label(r):
    """llama-bench's name of a result's test: pp512, tg128, pp512+tg128, "tg128 @ d8192" at a depth."""
    test = {"pp": f"pp{r.get('n_prompt')}", "tg": f"tg{r.get('n_gen')}",
            "pg": f"pp{r.get('n_prompt')}+tg{r.get('n_gen')}"}.get(r.get("test"), r.get("test") or "")
    return test + (f" @ d{r['n_depth']}" if r.get("n_depth") else "")


def configuration_label(r):
    """A point in words, e.g. "q4_0 · tg16 · 4 seq · 1 thread": its format, test and what sets it
    apart from the defaults (ISA, tile, binding, placement, KV type, prefetch, CPU set)."""
    test = test_label(r)
    sparsity = (r.get("config") or {}).get("sparsity")
    parts = [(r.get("format") or "?") + (f" sparse {float(sparsity):.0%}" if sparsity else ""), test]
    if (r.get("n_seq") or 1) > 1:
        parts.append(f"{r['n_seq']} seq")
    if r.get("n_threads") is not None:
        parts.append(f"{r['n_threads']} thread" + ("s" if r["n_threads"] != 1 else ""))
    for key, default, shown in (("isa", None, "{}"), ("attn_tile", "128x128", "tile {}"), ("binding", "none", "bind {}"),
                                ("placement", "first-touch", "{}"), ("kv_type", "f16", "{} KV"), ("cpuset", None, "CPUs {}")):
        if r.get(key) and r.get(key) != default:
            parts.append(shown.format(r[key]))
    if r.get("prefetch"):
        parts.append("prefetch")
    return " \u00b7 ".join(p for p in parts if p)


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
