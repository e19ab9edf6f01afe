"""Serving under load: `cpullm bench --load` (in process) and `bench --load --url` (against a
server: cpullm serve, llama.cpp's llama-server, any OpenAI-compatible one) by offered rate. Per
run, each server's p50/p99 time to first token, time per output token and inter-token gap, the
requests it completed, its goodput under the run's SLOs and its errors; a figure of the p99s
against the offered rate, one line per server. The Peers section sets servers side by side at
equal offered load (equal_load)."""
import os
from collections import defaultdict

from .page import Section, esc, figure, log_axis, new_figure, no_data, number, runs_source, table

HOW = ("cpullm bench -m MODEL --load -pg 128,64 --rate 0.5,1,2 -np 4 --db results.db, or against a server: "
       "cpullm serve -m MODEL & cpullm bench --load --url http://127.0.0.1:8080 -pg 128,64 --rate 0.5,1,2 --db results.db")


def field(r, key):
    """A load record's value: its summary column where the schema has one, else its metrics, else its configuration."""
    for source in (r, r.get("metrics") or {}, r.get("config") or {}):
        if source.get(key) is not None:
            return source[key]
    return None


def server(r):
    """Who served a load run: the engine at its URL, or cpullm in process."""
    url = (r.get("config") or {}).get("server_url")
    return f"{r.get('engine') or 'cpullm'} at {url}" if url else "cpullm in process"


def model_name(r):
    """The model file's name; where there is no file, the server's model id (cpullm serve's is the file's name,
    llama-server's its path)."""
    return os.path.basename(r.get("model_filename") or "") or os.path.basename(field(r, "model_type") or "") or "?"


def workload(r, contents):
    """What must match for two servers' runs to be compared: host, model, lengths."""
    return (contents.runs[r["run_id"]]["fingerprint"], model_name(r), r.get("n_prompt"), r.get("n_gen"))


def load_results(contents):
    return [r for r in contents.results + contents.peers if r.get("test") == "load" and field(r, "rate")]


def equal_load(contents):
    """Groups of runs of one workload at one offered rate by two or more servers."""
    by = defaultdict(dict)
    for r in load_results(contents):
        by[workload(r, contents) + (round(field(r, "rate"), 6),)][server(r)] = r  # the newest run of each server
    return {key: runs for key, runs in by.items() if len(runs) >= 2}


def row(r):
    errors = (r.get("metrics") or {}).get("errors") or {}
    done, sent = field(r, "completed"), field(r, "requests")
    return [esc(server(r)), esc(model_name(r)),
            esc(f"{r.get('n_prompt')}+{r.get('n_gen')}"), number(r.get("n_seq")), number(field(r, "rate")),
            number(field(r, "achieved_rps")), number(field(r, "ttft_p50_ms")), number(field(r, "ttft_p99_ms")),
            number(field(r, "tpot_p50_ms")), number(field(r, "tpot_p99_ms")), number(field(r, "itl_p99_ms")),
            number(field(r, "goodput_rps")),
            esc(", ".join(f"{k}: {v}" for k, v in errors.items()) or (f"{done} of {sent} done" if done is not None else "none")),
            esc(r["run_id"])]


HEADERS = ["server", "model", "prompt+gen", "slots", "offered req/s", "done req/s", "TTFT p50 ms", "TTFT p99 ms",
           "TPOT p50 ms", "TPOT p99 ms", "ITL p99 ms", "goodput req/s", "errors", "run"]


def build(contents, context):
    results = load_results(contents)
    if not results:
        return Section("load", "Serving under load", no_data("load runs (Poisson arrivals against a server)", HOW))
    results.sort(key=lambda r: (workload(r, contents)[1:], server(r), field(r, "rate")))
    series = defaultdict(list)
    for r in results:
        series[(server(r),) + workload(r, contents)[1:]].append(r)
    fig, (ax_ttft, ax_tpot) = new_figure(8, 3.4, columns=2)
    one_workload = len({key[1:] for key in series}) == 1  # then the server alone names a line
    for (name, model, n_prompt, n_gen), runs in series.items():
        runs = sorted(runs, key=lambda r: field(r, "rate"))
        label = name if one_workload else f"{name}: {model} {n_prompt}+{n_gen}"
        rates = [field(r, "rate") for r in runs]
        ax_ttft.plot(rates, [field(r, "ttft_p99_ms") or float("nan") for r in runs], marker="o", label=label)
        ax_tpot.plot(rates, [field(r, "tpot_p99_ms") or float("nan") for r in runs], marker="o")
    for ax, what in ((ax_ttft, "p99 time to first token (ms)"), (ax_tpot, "p99 time per output token (ms)")):
        ax.set_xlabel("offered load (requests/s)")
        ax.set_ylabel(what)
        log_axis(ax, "y")
    ax_ttft.legend(fontsize=6)
    body = ("<p>Requests arrive as a Poisson process at the offered rate, each with the prompt and generation lengths "
            "shown; every streamed token is timed where the requests are sent from. Goodput counts the requests per "
            "second that met both SLOs of the run (<code>--slo-ttft</code>, <code>--slo-tpot</code>).</p>")
    body += figure(fig, "p99 latency against offered load, per server", runs_source(contents.runs, results))
    body += table(HEADERS, [row(r) for r in results])
    return Section("load", "Serving under load", body)
