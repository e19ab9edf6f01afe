"""Latency: time to first token and time per output token per configuration, the inter-token
percentiles cpullm bench recorded, and the spread of the repetitions."""
import numpy as np

from .page import Section, configuration_label, esc, figure, log_axis, new_figure, no_data, number, runs_source, table


def configuration(result):
    """A point's label in words, with its run: two runs of one configuration stay apart."""
    return f"{configuration_label(result)} (run {result['run_id']})"


def repetition_ms_per_token(result, samples):
    """Each repetition's milliseconds per generated token (wall time / tokens generated)."""
    tokens = (result.get("n_gen") or 0) * max(result.get("n_seq") or 1, 1)
    if not tokens:
        return []
    return [s["ns"] / 1e6 / tokens for s in samples]


def build(contents, context):
    timed = [r for r in contents.results if r.get("ttft_ms") is not None or r.get("tpot_ms") is not None]
    if not timed:
        return Section("latency", "Latency", no_data(
            "time to first token and time per output token", "cpullm bench -m MODEL -p 128 -n 32 -r 5 --db results.db"))
    rows = [[esc(configuration(r)), number(r.get("ttft_ms")), number(r.get("tpot_ms")), number(r.get("itl_p50_ms")),
             number(r.get("itl_p90_ms")), number(r.get("itl_p99_ms")), number(r.get("n_threads")), esc(r.get("format")),
             number(r.get("n_seq")), esc(r["run_id"])] for r in timed]
    body = table(["configuration", "TTFT ms", "TPOT ms", "ITL p50 ms", "ITL p90 ms", "ITL p99 ms", "threads",
                  "format", "sequences", "run"], rows)

    shown = timed[:24]  # one bar pair per point; beyond two dozen the labels are unreadable
    fig, (ax_ttft, ax_tpot) = new_figure(8, 0.3 * len(shown) + 1.6, columns=2, sharey=True)
    labels = [configuration(r) for r in shown]
    y = np.arange(len(shown))
    ax_ttft.barh(y, [r.get("ttft_ms") or 0 for r in shown], color="#4c72b0")
    ax_ttft.set_yticks(y, labels, fontsize=7)
    ax_ttft.set_xlabel("time to first token (ms)")
    tpot = np.array([r.get("tpot_ms") or 0 for r in shown])
    p50 = np.array([r.get("itl_p50_ms") or t for r, t in zip(shown, tpot)])
    p99 = np.array([r.get("itl_p99_ms") or t for r, t in zip(shown, tpot)])
    ax_tpot.barh(y, tpot, color="#dd8452", xerr=[np.clip(tpot - p50, 0, None), np.clip(p99 - tpot, 0, None)])
    ax_tpot.set_xlabel("time per output token (ms), whiskers ITL p50..p99")
    for ax in (ax_ttft, ax_tpot):
        log_axis(ax)  # points from a laptop-sized model to LLaMA-7B span decades
    ax_ttft.invert_yaxis()
    body += figure(fig, "Time to first token and time per output token", runs_source(contents.runs, shown))

    spreads = [(configuration(r), repetition_ms_per_token(r, contents.samples.get(r["id"], []))) for r in timed]
    spreads = [(label, values) for label, values in spreads if len(values) >= 2][:24]
    if spreads:
        fig, ax = new_figure(8, 0.3 * len(spreads) + 1.4)
        ax.boxplot([v for _, v in spreads], vert=False, labels=[label for label, _ in spreads])
        ax.tick_params(axis="y", labelsize=7)
        ax.set_xlabel("wall time per generated token in one repetition (ms)")
        ax.invert_yaxis()
        body += figure(fig, "Distribution over repetitions", runs_source(contents.runs, [r for r in timed
                                                                                        if configuration(r) in dict(spreads)]))
    else:
        body += no_data("repetitions of a timed point (samples)", "cpullm bench ... -r 5 --db results.db")
    return Section("latency", "Latency", body)
