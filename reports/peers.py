"""Peers: cpullm against another engine (llama.cpp's llama-bench, run by `cpullm bench --engine` or
imported by `cpullm db import`) at the same points: the same host, model file, test, depth,
threads and KV cache type. Per point both engines' tokens/s with one standard deviation of their
repetitions, and cpullm's over the peer's with the range those deviations allow; where the peer is
faster the row says so as plainly as where cpullm is. A figure draws the ratios by weight format
and phase."""
import os
from collections import defaultdict

from . import load
from .page import Section, esc, figure, new_figure, no_data, number, runs_source, table, test_label

PHASES = {"tg": "decode", "pp": "prefill", "pg": "prefill+decode"}
HOW = ("cpullm bench -m MODEL -p 512 -n 128 --engine llama.cpp=LLAMA_BUILD/bin --db results.db, or import "
       "llama-bench output: cpullm db --db results.db import llama-bench.json (scripts/peer-llamacpp builds llama.cpp)")


def same_point(result):
    """What makes a cpullm result and a peer's on one host comparable: model file, test, lengths,
    depth, threads and KV type (each engine's default is F16). scripts/nightly matches by it too."""
    return (os.path.basename(result.get("model_filename") or ""), result.get("test"), result.get("n_prompt"),
            result.get("n_gen"), result.get("n_depth") or 0, result.get("n_threads"), result.get("kv_type") or "f16")


def point(contents, result):
    """same_point on the result's host."""
    return (contents.runs[result["run_id"]]["fingerprint"],) + same_point(result)


def comparisons(contents):
    """One row per peer result with a cpullm result at its point (cpullm's newest there, one
    sequence), in the peer results' order."""
    ours = {}
    for r in contents.results:
        if r.get("avg_ts") and r.get("test") in PHASES and (r.get("n_seq") or 1) == 1:
            ours[point(contents, r)] = r  # results come oldest first: the newest stays
    rows = []
    for peer in contents.peers:
        mine = ours.get(point(contents, peer))
        if mine and peer.get("avg_ts"):
            rows.append(comparison(mine, peer))
    return rows


def comparison(mine, peer):
    """The ratio of the means, and the range of ratios within one standard deviation of each."""
    m, p = mine["avg_ts"], peer["avg_ts"]
    dm, dp = mine.get("stddev_ts") or 0.0, peer.get("stddev_ts") or 0.0
    return {"cpullm": mine, "peer": peer, "ratio": m / p,
            "low": (m - dm) / (p + dp), "high": (m + dm) / (p - dp) if p > dp else float("inf")}


def engine_name(r):
    build = " ".join(x for x in (f"build {r['engine_version']}" if r.get("engine_version") else "",
                                 r.get("engine_commit") or "") if x)
    return f"{r.get('engine')} ({build})" if build else str(r.get("engine"))


def verdict(c):
    if c["low"] > 1:
        return f"cpullm {c['ratio']:.2f}\u00d7 faster"
    if c["high"] < 1:
        return f"<b>{esc(c['peer']['engine'])} {1 / c['ratio']:.2f}\u00d7 faster</b>"
    return f"within the spread ({c['ratio']:.2f}\u00d7)"


def with_spread(r):
    return f"{number(r['avg_ts'])} \u00b1 {number(r.get('stddev_ts') or 0.0, 2)}"


def ratio_table(rows):
    cells = [[esc(c["cpullm"].get("format")), esc(os.path.basename(c["cpullm"].get("model_filename") or "")),
              esc(f"{PHASES[c['cpullm']['test']]}: {test_label(c['cpullm'])}"), number(c["cpullm"].get("n_threads")),
              esc(c["cpullm"].get("kv_type") or "f16"), with_spread(c["cpullm"]), esc(engine_name(c["peer"])),
              with_spread(c["peer"]), f"{c['ratio']:.2f} [{c['low']:.2f}, {c['high']:.2f}]", verdict(c)]
             for c in rows]
    return table(["format", "model file", "test", "threads", "KV", "cpullm tokens/s", "peer", "peer tokens/s",
                  "cpullm / peer [range]", "verdict"], cells)


def ratio_figure(rows, runs):
    """Bars of cpullm / peer by weight format, one bar per phase, the median over the points."""
    by = defaultdict(list)
    for c in rows:
        by[(c["cpullm"].get("format") or "?", PHASES[c["cpullm"]["test"]])].append(c["ratio"])
    formats = sorted({f for f, _ in by})
    phases = [p for p in PHASES.values() if any(q == p for _, q in by)]
    fig, ax = new_figure()
    width = 0.8 / len(phases)
    for i, phase in enumerate(phases):
        xs = [k + (i - (len(phases) - 1) / 2) * width for k in range(len(formats))]
        heights = [sorted(by[(f, phase)])[len(by[(f, phase)]) // 2] if by.get((f, phase)) else 0 for f in formats]
        ax.bar(xs, heights, width, label=phase)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(formats)), formats)
    ax.set_xlabel("weight format")
    ax.set_ylabel("cpullm tokens/s over the peer's")
    ax.legend(fontsize=7)
    used = [c["cpullm"] for c in rows] + [c["peer"] for c in rows]
    return figure(fig, "cpullm over its peer, by weight format and phase (median of the points; 1: as fast)",
                  runs_source(runs, used))


def build(contents, context):
    rows = comparisons(contents)
    context.report_data["peers"] = [
        {"point": {k: c["cpullm"].get(k) for k in ("model_filename", "test", "n_prompt", "n_gen", "n_depth", "n_threads", "kv_type")},
         "cpullm_result": c["cpullm"]["id"], "peer_result": c["peer"]["id"], "peer_engine": c["peer"].get("engine"),
         "ratio": c["ratio"], "low": c["low"], "high": c["high"]} for c in rows]
    served = equal_load_table(contents)
    if not rows:
        what = ("llama.cpp at the same points as cpullm's" if not contents.peers else
                f"cpullm at the points of the {len(contents.peers)} peer results (same host, model file, test, threads, KV type)")
        return Section("peers", "Peers", no_data(what, HOW) + served)
    losses = sum(1 for c in rows if c["high"] < 1)
    body = (f"<p>{len(rows)} points measured by both engines; the peer is faster at {losses} of them. Tokens/s are each "
            "engine's mean \u00b1 one standard deviation of its repetitions; the range is the ratio those deviations allow. "
            "Every other section shows cpullm's own runs.</p>")
    body += ratio_figure(rows, contents.runs) + ratio_table(rows) + served
    return Section("peers", "Peers", body)


def equal_load_table(contents):
    """Servers side by side at equal offered load (the same host, model, lengths and rate)."""
    groups = load.equal_load(contents)
    if not groups:
        return ""
    rows = [load.row(r) for key in sorted(groups, key=str) for r in groups[key].values()]
    return ("<h3>Served at equal offered load</h3><p>Each group: one workload at one offered rate, sent by "
            "<code>cpullm bench --load [--url]</code> to each server.</p>" + table(load.HEADERS, rows))
