"""What a sweep keeps: one JSON line per finished evaluation in OUT/sweep-state.jsonl (written
and flushed as each finishes, so an interrupted sweep resumes without repeating one), the
evaluations as a `sweep` run of the results database, the sweep table, and the best
configuration per objective as a TOML config file."""
import json
import math
import os
import sqlite3
import subprocess
import time

import tomli_w  # Debian's python3-tomli-w

from . import files
from .space import DIMENSIONS, describe, point_key
from .stats import mean_ci

# objective: (metric in a sample, True when larger is better, unit)
OBJECTIVES = {
    "ttft": ("ttft_ms", False, "ms"),
    "tpot": ("tpot_ms", False, "ms"),
    "throughput": ("decode_tps", True, "tokens/s"),
    "cost": ("usd_per_mtok", False, "USD per million tokens"),
}


def better_for(objective):
    larger = OBJECTIVES[objective][1]
    return (lambda a, b: a > b) if larger else (lambda a, b: a < b)


class State:
    """The evaluations finished so far, by (point key, level), and whether the sweep finished
    (its last line {"finished": TIME}, written once its table and configs are)."""

    def __init__(self, path, resume):
        self.path, self.done, self.finished = path, {}, None
        if os.path.exists(path):
            if not resume:
                raise FileExistsError(f"{path}: a sweep was already run here; --resume continues it, or choose another --out")
            for line in files.read_input(path, max_bytes=1 << 30).splitlines():
                if line.strip():
                    r = json.loads(line)
                    if "finished" in r:
                        self.finished = r["finished"]
                    else:
                        self.done[(r["key"], r["level"])] = r

    def get(self, point, level):
        return self.done.get((point_key(point), level))

    def add(self, result):
        self.done[(result["key"], result["level"])] = result
        self._append(result)

    def finish(self):
        self.finished = utc_now()
        self._append({"finished": self.finished})

    def _append(self, line):
        with files.open_append(self.path) as f:
            f.write(json.dumps(line) + "\n")
            f.flush()
            os.fsync(f.fileno())


def evaluate_stored(state, point, level, measure):
    """The stored result of (point, level), or measure(point, level)'s, stored at once.
    Returns (result, whether it was measured now)."""
    stored = state.get(point, level)
    if stored is not None:
        return stored, False
    result = measure(point, level)
    state.add(result)
    return result, True


class SweepDb:
    """The sweep as a run of kind 'sweep' in an SQLite results database: one `results` row per
    finished evaluation (test 'pg': its prompt and generation metrics, averaged over the
    repetitions; case name sweep/LEVEL/POINT), one `samples` row per repetition.

    cpullm bench, which measures every repetition, writes its own runs into `bench_db` (a
    database of the sweep's own, so that the results database holds each point once). Rows go in
    through `cpullm db import --resume`, the database's one writer: it creates the tables, fills
    the run's host fields, continues the last unfinished sweep run of the same command on this
    host (as bench --resume does) and skips an evaluation already stored."""

    def __init__(self, cpullm, path, bench_db, command, workload, source_format):
        self.cpullm, self.path, self.bench_db, self.command = cpullm, path, bench_db, command
        self.workload, self.source_format, self.recorded = workload, source_format, False

    def _import(self, run, results):
        document = {"run": dict(run, kind="sweep", command=self.command), "results": results}
        proc = subprocess.run([self.cpullm, "db", "--db", self.path, "import", "--resume", "-"], input=json.dumps(document),
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise ValueError(proc.stderr.strip().removeprefix("cpullm: error: "))

    def record(self, result, model_path):
        """Stores a finished evaluation (once: a case already in the run is left as it is).
        model_path: the file as bench was given it; the model's type, size and parameters are
        taken from bench's rows for it, the ISA from the host (the sweep does not set --isa)."""
        if result["error"] or not result["samples"] or not os.path.exists(self.bench_db):
            return
        bench = sqlite3.connect(f"file:{self.bench_db}?mode=ro", uri=True, timeout=30)
        with bench:
            model = bench.execute("SELECT model_type, model_size, model_n_params FROM results WHERE model_filename = ? "
                                  "ORDER BY id DESC LIMIT 1", (model_path,)).fetchone() or (None, None, None)
            isa = bench.execute("SELECT isa_level FROM runs ORDER BY id DESC LIMIT 1").fetchone()[0]
        bench.close()
        point, m = result["point"], result["metrics"]
        mean = lambda name: m[name]["mean"] if name in m else None
        decode = [s["decode_tps"] for s in result["samples"]]
        row = {"case_name": f"sweep/{result['level']}/{result['key']}", "test": "pg", "model_filename": os.path.abspath(model_path),
               "model_type": model[0], "model_size": model[1], "model_n_params": model[2], "isa": isa,
               "format": point.get("format", self.source_format), "n_threads": point.get("threads"),
               "binding": point.get("bind"), "cpuset": point.get("cpuset"), "attn_tile": point.get("attn_tile"),
               "kv_type": point.get("kv_type"), "n_batch": point.get("batch"), "n_seq": point.get("sequences", 1),
               "placement": point.get("placement"), "prefetch": point.get("prefetch"),
               "n_prompt": self.workload["prompt"], "n_gen": self.workload["gen"], "n_depth": self.workload.get("depth", 0),
               "config_json": json.dumps(dict(point, level=result["level"], **self.workload), sort_keys=True),
               "avg_ts": mean("decode_tps"), "stddev_ts": stddev(decode), "ttft_ms": mean("ttft_ms"),
               "tpot_ms": mean("tpot_ms"), "itl_p99_ms": mean("itl_p99_ms"),
               "metrics_json": json.dumps({"level": result["level"], "value": result["value"], "metrics": m}),
               "test_time": utc_now(),
               # ns: the repetition's prompt and generation time, TTFT plus the generated tokens at their rate.
               "samples": [{"repetition": i, "ns": s["ttft_ms"] * 1e6 + self.workload["gen"] / s["decode_tps"] * 1e9,
                            "ts": s["decode_tps"], "metrics_json": json.dumps(s)} for i, s in enumerate(result["samples"])]}
        self._import({}, [row])
        self.recorded = True

    def finish(self):
        if self.recorded:
            self._import({"finished_at": utc_now()}, [])


def utc_now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def stddev(values):
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def summarize(point, level, samples, objective, error=None):
    """A finished evaluation: per metric the mean and 95% half-width, and the objective's value."""
    metric = OBJECTIVES[objective][0]
    result = {"key": point_key(point), "level": level, "point": point, "samples": samples, "error": error,
              "metrics": {}, "value": None}
    for name in sorted({k for s in samples for k in s}):
        values = [s[name] for s in samples if name in s]
        mean, half = mean_ci(values)
        result["metrics"][name] = {"mean": mean, "ci95": None if math.isinf(half) else half, "n": len(values)}
    if metric in result["metrics"] and not error:
        result["value"] = result["metrics"][metric]["mean"]
    return result


def sweep_table(results, objective):
    """Markdown: one row per evaluation (level 0, 1, ... of the strategy, or "confirm": the
    winner and runner-up re-measured in alternation)."""
    metric, larger, unit = OBJECTIVES[objective]
    rows = ["| level | point | prefill tok/s | decode tok/s | TTFT ms | TPOT ms | p99 ITL ms | n | "
            f"{objective} ({unit}) ±95% |", "|---|---|---|---|---|---|---|---|---|"]

    def cell(r, name, fmt="{:.1f}"):
        m = r["metrics"].get(name)
        return fmt.format(m["mean"]) if m else "-"

    def order(r):  # the confirmation runs first, then the highest level; best first within each
        confirm = r["level"] == "confirm"
        return (not confirm, 0 if confirm else -r["level"], r["value"] is None, (-1 if larger else 1) * (r["value"] or 0))

    for r in sorted(results, key=order):
        m = r["metrics"].get(metric)
        value = r["error"] or (f"{m['mean']:.3g} ± {m['ci95']:.2g}" if m and m["ci95"] is not None
                               else f"{m['mean']:.3g} (1 sample)" if m else "-")
        rows.append(f"| {r['level']} | {describe(r['point'])} | {cell(r, 'prefill_tps')} | {cell(r, 'decode_tps', '{:.2f}')} | "
                    f"{cell(r, 'ttft_ms')} | {cell(r, 'tpot_ms')} | {cell(r, 'itl_p99_ms')} | "
                    f"{len(r['samples'])} | {value} |")
    return "\n".join(rows) + "\n"


# Options `cpullm bench` has and `generate` lacks: they go in a [bench] section, which generate's
# --config leaves to bench (cli/config_file: keys at the top are for both, [bench] and
# [generate] for one).
BENCH_ONLY = {"placement", "batch-size"}


def write_config(path, model, point, comment_lines):
    """The point as a config file for `cpullm generate/bench --config FILE`: long option names,
    the options both commands have at the top, bench's own under [bench]."""
    config, bench = {"model": model}, {}
    for key, value in point.items():
        name = DIMENSIONS[key][1]
        if name and key != "sparsity":
            (bench if name in BENCH_ONLY else config)[name] = value
    if bench:
        config["bench"] = bench
    files.write_output(path, "".join(f"# {c}\n" for c in comment_lines) + tomli_w.dumps(config))
