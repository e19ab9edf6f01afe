"""Suites: every run a suites/ script stored (`cpullm bench --suite`): its tokens/s against the
roof or peak the script read before it, the share of it the run reached, and the script's command
line that reproduces it."""
import os

from .page import Section, esc, no_data, paragraph, table

UNITS = {"bytes": ("GB/s", "MB"), "operations": ("GOP/s", "MOP")}  # reference_unit -> (rate, work a token) labels
HOW = "suites/decode_bandwidth.py --db results/results.db; suites/prefill_compute.py --db results/results.db"


def tokens_per_s(result):
    """A decode run's steps after the first token's (1000 / tpot_ms), as suites/decode_bandwidth.py
    counts them; a prompt's mean over its repetitions (avg_ts)."""
    if result.get("test") == "tg" and result.get("tpot_ms"):
        return 1000 / result["tpot_ms"]
    return result.get("avg_ts")


def share(result):
    """tokens/s x work a token / the reference rate: the share of the roof or peak the run reached."""
    metrics, tps = result["metrics"], tokens_per_s(result)
    if not tps or not metrics.get("reference_rate") or not metrics.get("work_per_token"):
        return None
    return tps * metrics["work_per_token"] / metrics["reference_rate"]


def percent(value):
    return "\u2014" if value is None else f"{value:.0%}"


def row(result):
    metrics = result["metrics"]
    rate_label, work_label = UNITS.get(metrics.get("reference_unit"), ("/s", ""))
    tps = tokens_per_s(result)
    case = f"{os.path.basename(result.get('model_filename') or '')} {result.get('test')}{result.get('n_prompt') or result.get('n_gen')}"
    return [esc(case), esc(result.get("format")), esc(result.get("isa")), esc(result.get("n_threads")),
            "\u2014" if tps is None else f"{tps:,.1f}",
            f"{metrics['reference_rate'] / 1e9:,.1f} {rate_label}: {esc(metrics.get('reference'))}",
            f"{metrics['work_per_token'] / 1e6:,.1f} {work_label}", percent(share(result)),
            percent(metrics.get("paired_roof_share")), esc(f"run {result['run_id']}"),
            f"<code>{esc(metrics.get('suite_command'))}</code>"]


def build(contents, context):
    runs = [r for r in contents.results if r["metrics"].get("suite") and r["metrics"].get("reference_rate")]
    if not runs:
        return Section("suites", "Suites", no_data("a suites/ script's runs against the roofs", HOW))
    body = paragraph("share: tokens/s x the work a token takes (weight bytes read, or operations) over the reference "
                     "the script read before the run; paired share: the decode's weight bandwidth over reads of memory "
                     "paired with its steps inside the run (cpullm bench --roof-pairs). The command reproduces the run.")
    for suite in sorted({r["metrics"]["suite"] for r in runs}):
        rows = [row(r) for r in runs if r["metrics"]["suite"] == suite]
        body += f"<h3>{esc(suite)}</h3>" + table(
            ["case", "format", "ISA", "threads", "tokens/s", "reference", "per token", "share", "paired share", "measured",
             "command"], rows)
    return Section("suites", "Suites", body)
