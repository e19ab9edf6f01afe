"""Sweeps: heatmaps of tokens/s over two options at a time (attention tile x threads, format x
batch) and the best measured configuration for each objective."""
import numpy as np

from .page import Section, configuration_label, esc, figure, new_figure, no_data, number, runs_source, table

# (row option, column option, how to measure) of each heatmap.
HEATMAPS = [
    ("attn_tile", "n_threads", "cpullm sweep (space with attn_tile and threads) --db results.db"),
    ("format", "n_seq", "cpullm sweep (space with format and sequences) --db results.db"),
]
# (objective, metric, True when larger is better).
OBJECTIVES = [
    ("generation throughput", "avg_ts", True),
    ("time to first token", "ttft_ms", False),
    ("time per output token", "tpot_ms", False),
    ("p99 inter-token latency", "itl_p99_ms", False),
    ("peak memory", "peak_rss_bytes", False),
]


def heatmap(contents, row_option, column_option):
    """Mean tokens/s of the generation points at each (row, column) pair; None with fewer than 2x2."""
    cells = {}
    used = []
    for r in contents.results:
        if r.get("test") in ("tg", "pg") and r.get("avg_ts") and r.get(row_option) is not None and r.get(column_option) is not None:
            cells.setdefault((r[row_option], r[column_option]), []).append(r["avg_ts"])
            used.append(r)
    rows = sorted({k[0] for k in cells}, key=str)
    columns = sorted({k[1] for k in cells}, key=lambda v: (isinstance(v, str), v))
    if len(rows) < 2 or len(columns) < 2:
        return None
    grid = np.full((len(rows), len(columns)), np.nan)
    for (row, column), values in cells.items():
        grid[rows.index(row), columns.index(column)] = np.mean(values)
    fig, ax = new_figure(6, 0.45 * len(rows) + 1.8)
    image = ax.imshow(grid, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(columns)), [str(c) for c in columns])
    ax.set_yticks(range(len(rows)), [str(r) for r in rows])
    ax.set_xlabel(column_option)
    ax.set_ylabel(row_option)
    for (i, j), value in np.ndenumerate(grid):
        if not np.isnan(value):
            ax.text(j, i, f"{value:.3g}", ha="center", va="center", color="white", fontsize=7)
    fig.colorbar(image, ax=ax, label="generation tokens/s (mean of points)")
    return figure(fig, f"tokens/s by {row_option} and {column_option}", runs_source(contents.runs, used))


def best_configurations(contents):
    rows = []
    for objective, metric, larger in OBJECTIVES:
        candidates = [r for r in contents.results if r.get(metric) is not None and r.get("test") != "kernel"]
        if not candidates:
            rows.append([esc(objective), "\u2014", "not measured yet", "", ""])
            continue
        best = (max if larger else min)(candidates, key=lambda r: r[metric])
        run = contents.runs[best["run_id"]]
        rows.append([esc(objective), number(best[metric]), esc(configuration_label(best)), esc(best.get("model_type") or ""),
                     esc(f"run {best['run_id']} on {run['host']}")])
    return table(["objective", "best value", "configuration", "model", "measured"], rows)


def build(contents, context):
    body = ""
    for row_option, column_option, how in HEATMAPS:
        body += heatmap(contents, row_option, column_option) or no_data(
            f"generation tokens/s over two or more {row_option} and {column_option} values", how)
    body += "<h3>Best configuration per objective</h3>" + best_configurations(contents)
    return Section("sweeps", "Sweeps", body)
