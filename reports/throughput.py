"""Throughput and scaling: tokens/s against threads, concurrent sequences, weight format, NUMA
placement and context depth (llama-bench's -d), each plotted where the database holds points differing in that option; the seed's
workload (batch 32, prompt 512) on its own."""
from collections import defaultdict

from .page import Section, configuration_label, esc, figure, new_figure, no_data, number, runs_source, table

# (option, axis label, how to measure it) for each scaling figure.
DIMENSIONS = [
    ("n_threads", "threads", "cpullm bench -m MODEL -t 1,2 -p 128 -n 32 --db results.db"),
    ("n_seq", "concurrent sequences", "cpullm bench -m MODEL -np 1,4,8 -n 32 --db results.db"),
    ("format", "weight format", "cpullm bench -m MODEL_f16,MODEL_q8_0,MODEL_q4_0 -n 32 --db results.db"),
    ("placement", "NUMA weight placement", "cpullm bench -m MODEL --placement first-touch,interleave,replicate,shard --db results.db"),
    ("n_depth", "context depth (positions filled before the test)",
     "cpullm bench -m MODEL -p 0 -n 32 -d 0,2048,8192 --kv-type f32,f16 --db results.db"),
]
SEED_SEQUENCES, SEED_PROMPT = 32, 512


def phase(result):
    return {"pp": "prompt", "tg": "generation", "pg": "prompt+generation"}.get(result.get("test"), result.get("test"))


def scaling_figure(contents, option, label):
    """tokens/s against one option, a line per group of points equal in every other main option;
    None when no group has two values of it."""
    others = [f for f, _, _ in DIMENSIONS if f != option] + ["test", "model_n_params", "isa", "n_prompt", "n_gen", "attn_tile", "prefetch",
                                                              "kv_type"]
    groups = defaultdict(dict)
    for r in contents.results:
        if r.get("avg_ts") is None or r.get(option) is None or r.get("test") not in ("pp", "tg", "pg"):
            continue
        host = contents.runs[r["run_id"]]["fingerprint"]  # one line per host: never mix machines
        groups[(host,) + tuple(r.get(f) for f in others)][r[option]] = r
    groups = {key: points for key, points in groups.items() if len(points) >= 2}
    if not groups:
        return None
    fig, ax = new_figure()
    # A categorical option (format, placement) gets bars side by side; a numeric one lines.
    categorical = any(isinstance(v, str) for points in groups.values() for v in points)
    categories = sorted({v for points in groups.values() for v in points}, key=str)
    shown = list(groups.items())[:10]
    width = 0.8 / len(shown)
    used = []
    for i, (key, points) in enumerate(shown):
        values = sorted(points, key=lambda v: categories.index(v) if categorical else v)
        first = points[values[0]]
        kv = f" {first['kv_type']} KV" if first.get("kv_type") else ""
        legend = f"{phase(first)} {first.get('format') or ''} {first.get('model_type') or ''} t{first.get('n_threads')}{kv}"
        if categorical:
            ax.bar([categories.index(v) + (i - (len(shown) - 1) / 2) * width for v in values],
                   [points[v]["avg_ts"] for v in values], width, label=legend)
        else:
            ax.plot(values, [points[v]["avg_ts"] for v in values], marker="o", label=legend)
        used += points.values()
    if categorical:
        ax.set_xticks(range(len(categories)), categories)
    ax.set_xlabel(label)
    ax.set_ylabel("tokens/s")
    ax.legend(fontsize=7)
    return figure(fig, f"Throughput against {label}", runs_source(contents.runs, used))


def seed_workload(contents):
    seed = [r for r in contents.results if r.get("n_seq") == SEED_SEQUENCES and r.get("n_prompt") == SEED_PROMPT]
    if not seed:
        return no_data("the seed's workload (LLaMA-7B shape, 32 sequences, 512-token prompts)",
                       "cpullm bench --workload seed --db results.db")
    rows = [[esc(configuration_label(r)), esc(r.get("model_type")), number(r.get("avg_ts")), number(r.get("ttft_ms")),
             number(r.get("tpot_ms")), esc(contents.runs[r["run_id"]]["host"]), esc(r["run_id"])] for r in seed]
    return table(["configuration", "model", "tokens/s", "TTFT ms", "TPOT ms", "host", "run"], rows)


def sharing_results(contents):
    """cpullm bench --processes results: memory of N processes running one mapped model."""
    return [r for r in contents.results if r.get("test") == "multiproc" and "model_saved_fraction" in r["metrics"]]


def memory_sharing(contents):
    sharing = sharing_results(contents)
    if not sharing:
        return no_data("memory saved by processes sharing the mapped model", "cpullm bench -m MODEL --processes 4 --db results.db")
    mib = 2 ** 20

    def in_mib(value):
        return number(value / mib) if value is not None else number(None)
    rows = [[esc(configuration_label(r)), esc(r.get("model_type")), number(r["config"].get("processes")),
             in_mib(r["metrics"].get("model_sum_rss_bytes")), in_mib(r["metrics"].get("model_sum_pss_bytes")),
             f"{r['metrics']['model_saved_fraction']:.1%}",
             f"{r['metrics']['saved_fraction']:.1%}" if r["metrics"].get("saved_fraction") is not None else number(None),
             esc(contents.runs[r["run_id"]]["host"]), esc(r["run_id"])] for r in sharing]
    return table(["configuration", "model", "processes", "model Rss MiB (sum)", "model Pss MiB (sum)", "model's memory saved",
                  "whole processes saved", "host", "run"], rows)


def build(contents, context):
    body = ""
    for option, label, how in DIMENSIONS:
        body += scaling_figure(contents, option, label) or no_data(f"tokens/s at two or more {label} values", how)
    body += "<h3>The seed's workload: batch 32, prompt 512</h3>" + seed_workload(contents)
    body += ("<h3>Memory shared between processes (cpullm bench --processes)</h3>"
             "<p>Saved = 1 - sum(Pss) / sum(Rss); N processes sharing every page of the model save 1 - 1/N (claim C11).</p>"
             + memory_sharing(contents))
    return Section("throughput", "Throughput and scaling", body)
