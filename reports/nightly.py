"""scripts/nightly: runs a fixed suite (kernel benchmarks, end-to-end `cpullm bench` cases on a
small synthetic model and the long-context workload), stores it in the database with the commit, compares every case with the
history of the same host (fingerprint) and case, writes an HTML dashboard with a trend plot per
case, and exits 1 when a case regressed (docs/nightly.md). With --peer the end-to-end cases also
run on a peer engine (llama.cpp), and cpullm's time over the peer's at each case is a case of its
own: a fall in cpullm's lead is flagged as a slower cpullm is."""
import argparse
import datetime
import json
import os
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

from tuning import files
from tuning.cli_errors import os_error

from . import page
from . import regression
from .peers import same_point
from .resultsdb import Database, DatabaseError

# The end-to-end cases: one prompt and one generation test on a 4-layer model of 256 wide,
# seconds per run; the kernels: bandwidth and peak roofs, a matvec per weight type family at the
# LLaMA-7B attention shape, and attention with two tile sizes.
MODEL_SHAPE = ["--shape", "custom", "--layers", "4", "--dim", "256", "--ffn", "768", "--heads", "8", "--kv-heads", "4",
               "--vocab", "4000", "--ctx", "512", "--dtype", "f32", "--seed", "7"]
E2E_FLAGS = ["-p", "64", "-n", "16", "-t", "1"]
KERNEL_FILTER = r"^(memory_read/|peak/0/|matvec/(1|8)/4096/4096/-1/|attention/512/(8/8|64/64)/)"


@dataclass
class Finding:
    case: str              # model/case, as printed
    comparison: regression.Comparison
    steps: list            # (run id, commit) where the per-run medians step


def fail(message):
    print(f"nightly: error: {message}", file=sys.stderr)
    sys.exit(1)


def run(command, **kw):
    result = subprocess.run(command, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        fail(f"{' '.join(command)} exited {result.returncode}: {result.stderr.strip()[-2000:]}")
    return result.stdout


def newest_run(db):
    rows = db.query("SELECT MAX(id) AS id FROM runs")
    return rows[0]["id"] or 0


def newest_commit_runs(db):
    """The runs of the newest run's commit since the last run of another commit (one nightly)."""
    runs = db.query("SELECT id, git_commit FROM runs ORDER BY id DESC")
    current = []
    for r in runs:
        if r["git_commit"] != runs[0]["git_commit"]:
            break
        current.append(r["id"])
    return current


def run_e2e(args):
    """cpullm bench writes its own run (host, fingerprint, commit) and results, creating the
    database on the first night; returns the run's id."""
    model = os.path.join(args.workdir, "nightly-model.gguf")
    if not os.path.exists(model):
        run([args.cpullm, "gen-model", *MODEL_SHAPE, "-o", model])
    before = newest_run(Database(args.db)) if os.path.exists(args.db) else 0
    extra = ["--inject-delay-ms", str(args.inject_delay_ms)] if args.inject_delay_ms else []
    extra += ["--engine", args.peer] if args.peer else []
    run([args.cpullm, "bench", "-m", model, *E2E_FLAGS, "-r", str(args.repetitions), "-o", "json", "--db", args.db, *extra])
    after = newest_run(Database(args.db))
    if after == before:
        fail(f"{args.cpullm} bench wrote no run to {args.db}")
    return after


def run_long_context(args):
    """The long-context workload (suites/workloads.json: an 8,192-token prompt, 256 generated),
    its model written into --workdir on the first night; returns the run's id."""
    before = newest_run(Database(args.db))
    run([args.cpullm, "bench", "--workload", "long-context", "--workload-dir", args.workdir, "-t", "2",
         "-r", str(args.long_repetitions), "-o", "json", "--db", args.db])
    after = newest_run(Database(args.db))
    if after == before:
        fail(f"{args.cpullm} bench --workload long-context wrote no run to {args.db}")
    return after


def run_kernels(args, db, host_run_id):
    """bench_kernels with JSON output, one result per benchmark and a sample per repetition,
    stored as a `kernels` run on the host and commit of the end-to-end run."""
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    command = [args.bench_kernels, f"--benchmark_filter={args.kernel_filter}", f"--benchmark_repetitions={args.repetitions}",
               "--benchmark_min_time=0.05", "--benchmark_format=json"]
    report = json.loads(run(command))
    host = db.query("SELECT * FROM runs WHERE id = ?", (host_run_id,))[0]
    run_row = {k: host[k] for k in ("git_commit", "host", "cpu_model", "cores", "sockets", "numa_nodes", "memory_bytes", "kernel",
                                    "isa_level", "governor", "fingerprint")}
    run_row.update(kind="kernels", command=" ".join(command), started_at=started,
                   finished_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    results = []
    by_name = {}
    for b in report["benchmarks"]:
        if b.get("run_type") == "iteration" and not b.get("error_occurred"):
            by_name.setdefault(b["run_name"], []).append(b)
    for name, reps in by_name.items():
        scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[reps[0]["time_unit"]]
        ns = [b["real_time"] * scale for b in reps]
        counters = {k: float(np.median([b[k] for b in reps])) for k in ("bytes_per_second", "FLOP/s", "OP/s") if k in reps[0]}
        results.append({"case_name": f"kernel/{name}", "test": "kernel",
                        "config_json": json.dumps({"benchmark": name, "label": reps[0].get("label", "")}),
                        "avg_ns": float(np.mean(ns)), "stddev_ns": float(np.std(ns, ddof=1)) if len(ns) > 1 else None,
                        "metrics_json": json.dumps(counters),
                        "samples": [{"repetition": i, "ns": value} for i, value in enumerate(ns)]})
    # cpullm writes the database; this only hands it the run.
    run([args.cpullm, "db", "--db", args.db, "import", "-"], input=json.dumps({"run": run_row, "results": results}))
    return newest_run(db)


def history(db, fingerprint):
    """case key -> [(run id, commit, repetition times in ns)], oldest first, over every run of
    this host. The key is the case name with the model, so a changed suite starts a new history.
    A peer engine's results are not cases of their own (its speed is not cpullm's to keep): each
    makes a ratio case, "MODEL/CASE vs ENGINE", of cpullm's repetition times at the same point in
    the same run over the peer's median, so that the lead over the peer shrinking is a regression."""
    rows = db.query("SELECT runs.id AS run_id, runs.git_commit, results.id AS result_id, results.case_name, results.model_type, "
                    "results.engine, results.model_filename, results.test, results.n_prompt, results.n_gen, results.n_depth, "
                    "results.n_threads, results.kv_type, samples.ns FROM runs JOIN results ON results.run_id = runs.id "
                    "JOIN samples ON samples.result_id = results.id "
                    "WHERE runs.fingerprint = ? ORDER BY runs.id, samples.repetition", (fingerprint,))
    series, peers = {}, {}
    for row in rows:
        if row["engine"] not in (None, "cpullm"):
            peers.setdefault((row["run_id"], same_point(row)), (row["engine"], []))[1].append(row["ns"])
            continue
        key = f"{row['model_type']}/{row['case_name']}" if row["model_type"] else row["case_name"]
        runs = series.setdefault(key, [])
        if not runs or runs[-1][0] != row["run_id"]:
            runs.append((row["run_id"], row["git_commit"] or "unknown", [], same_point(row)))
        runs[-1][2].append(row["ns"])
    for key, runs in list(series.items()):
        for run_id, commit, times, where in runs:
            if (run_id, where) in peers:
                engine, peer_times = peers[(run_id, where)]
                ratio_runs = series.setdefault(f"{key} vs {engine}", [])
                ratio_runs.append((run_id, commit, [t / float(np.median(peer_times)) for t in times], where))
    return {key: [r[:3] for r in runs] for key, runs in series.items()}


def analyse(series, current_runs, args):
    """A Finding per case the current runs measured and whose history has at least one earlier run."""
    findings = []
    for case, runs in sorted(series.items()):
        current = [r for r in runs if r[0] in current_runs]
        earlier = [r for r in runs if r[0] < min(current_runs)]
        if not current or not earlier:
            continue
        baseline = [ns for r in earlier[-args.history:] for ns in r[2]]
        comparison = regression.compare(baseline, current[-1][2], args.alpha, args.min_effect)
        series_runs = earlier + current[-1:]
        medians = [float(np.median(r[2])) for r in series_runs]
        steps = [(series_runs[i][0], series_runs[i][1]) for i in regression.change_points(medians, args.min_effect)]
        findings.append(Finding(case, comparison, steps))
    return findings


def print_findings(findings):
    for f in findings:
        c = f.comparison
        step = "; step at " + ", ".join(f"run {run} (commit {commit})" for run, commit in f.steps) if f.steps else ""
        unit, scale = ("x the peer's time", 1) if " vs " in f.case else ("ms", 1e6)
        print(f"{c.verdict.upper():12} {f.case}: median {c.baseline_median / scale:.4g} -> {c.current_median / scale:.4g} {unit} "
              f"({c.change:+.1%}), Mann-Whitney p = {c.p_value:.3g}{step}")
    regressions = sum(f.comparison.verdict == "regression" for f in findings)
    improvements = sum(f.comparison.verdict == "improvement" for f in findings)
    print(f"nightly: {len(findings)} cases compared, {regressions} regressions, {improvements} improvements")
    return regressions


def dashboard(series, findings, path, db_path, host):
    verdicts = {f.case: f for f in findings}
    body = ""
    for case, runs in sorted(series.items()):
        scale = 1 if " vs " in case else 1e6  # ratio cases are unitless; the rest ns, drawn as ms
        medians = [np.median(r[2]) / scale for r in runs]
        low = [np.min(r[2]) / scale for r in runs]
        high = [np.max(r[2]) / scale for r in runs]
        fig, ax = page.new_figure(7, 2.6)
        x = np.arange(len(runs))
        finding = verdicts.get(case)
        colour = "#c03030" if finding and finding.comparison.verdict == "regression" else "#3060a0"
        ax.errorbar(x, medians, yerr=[np.subtract(medians, low), np.subtract(high, medians)], fmt="o-", color=colour, capsize=2)
        for run_id, _ in finding.steps if finding else []:
            ax.axvline([r[0] for r in runs].index(run_id) - 0.5, color="#c08000", linestyle="--")
        ax.set_xticks(x, [f"{r[0]}\n{r[1][:8]}" for r in runs], fontsize=6)
        ax.set_ylabel("time over the peer's" if " vs " in case else "ms per repetition")
        verdict = f"{finding.comparison.verdict} ({finding.comparison.change:+.1%}, p = {finding.comparison.p_value:.2g})" if finding else "no history yet"
        body += page.figure(fig, f"{case}: {verdict}",
                            f"measured, {db_path}: runs {', '.join(str(r[0]) for r in runs)} (commits under the run ids); "
                            "points are medians, whiskers min..max of the repetitions; dashed lines are change points")
    sections = [page.Section("trends", "Trends per case", body or page.no_data("any nightly run", "scripts/nightly"))]
    files.write_output(path, page.render("cpullm nightly", f"{len(findings)} cases compared; database {db_path}; host {host}",
                                         sections))


def parse_arguments(argv):
    repo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    parser = argparse.ArgumentParser(prog="scripts/nightly", description=__doc__.split("\n\n")[0])
    parser.error = fail  # a bad flag is bad input: one line, exit status 1
    parser.add_argument("--db", default=os.path.join(repo, "build", "nightly.db"), help="results database (SQLite; created if absent)")
    parser.add_argument("--cpullm", default=os.path.join(repo, "build", "cpullm"))
    parser.add_argument("--bench-kernels", default=os.path.join(repo, "build", "suites", "kernels", "bench_kernels"))
    parser.add_argument("--workdir", default=os.path.join(repo, "build", "nightly"), help="where the synthetic model is written")
    parser.add_argument("--suite", default="e2e,kernels,long-context",
                        help="e2e, kernels, long-context, comma-separated (e2e always runs: it records the host)")
    parser.add_argument("--kernel-filter", default=KERNEL_FILTER)
    parser.add_argument("-r", "--repetitions", type=int, default=7)
    parser.add_argument("--long-repetitions", type=int, default=3, help="repetitions of the long-context workload (minutes each)")
    parser.add_argument("--history", type=int, default=10, help="earlier runs pooled as the baseline")
    parser.add_argument("--alpha", type=float, default=0.01, help="significance level of the Mann-Whitney test")
    parser.add_argument("--min-effect", type=float, default=0.10, help="smallest relative change of the median reported")
    parser.add_argument("--inject-delay-ms", type=float, default=0, help="passed to cpullm bench: a deliberately slowed run")
    parser.add_argument("--peer", help="passed to the end-to-end cpullm bench as --engine (llama.cpp=PATH): the peer's "
                                       "time at each case becomes a ratio case")
    parser.add_argument("--compare-only", action="store_true", help="run nothing: compare the newest run in --db with its history")
    parser.add_argument("--dashboard", help="HTML dashboard to write (default: next to the database)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_arguments(argv)
    unknown = set(args.suite.split(",")) - {"e2e", "kernels", "long-context"}
    if unknown:
        fail(f"--suite: unknown part(s) {', '.join(sorted(unknown))} (e2e, kernels, long-context)")
    args.dashboard = args.dashboard or os.path.splitext(args.db)[0] + "-dashboard.html"
    try:
        if args.compare_only:
            db = Database(args.db)
            current = newest_commit_runs(db)
            if not current:
                fail(f"{args.db}: no runs to compare")
        else:
            os.makedirs(args.workdir, exist_ok=True)
            current = [run_e2e(args)]
            db = Database(args.db)
            if "kernels" in args.suite.split(","):
                current.append(run_kernels(args, db, current[0]))
            if "long-context" in args.suite.split(","):
                current.append(run_long_context(args))
        newest = db.query("SELECT host, cpu_model, fingerprint FROM runs WHERE id = ?", (max(current),))[0]
        fingerprint = newest["fingerprint"]
        series = history(db, fingerprint)
    except DatabaseError as e:
        fail(str(e))
    findings = analyse(series, set(current), args)
    regressions = print_findings(findings)
    try:
        dashboard(series, findings, args.dashboard, args.db,
                  f"{newest['host']} ({newest['cpu_model'] or 'CPU unknown'}, fingerprint {fingerprint})")
    except OSError as e:
        fail(os_error(e))
    print(f"nightly: dashboard {os.path.abspath(args.dashboard)}")
    sys.exit(1 if regressions else 0)


if __name__ == "__main__":
    main()
