"""What a sweep keeps: one JSON line per finished evaluation in OUT/sweep-state.jsonl (written
and flushed as each finishes, so an interrupted sweep resumes without repeating one), the
evaluations as a `sweep` run of the results database, the sweep table, and the best
configuration per objective as a TOML config file."""
import json
import math
import os
import sqlite3
import time

import tomli_w  # Debian's python3-tomli-w

from space import DIMENSIONS, describe, point_key
from stats import mean_ci

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
            with open(path) as f:
                for line in f:
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
        with open(self.path, "a") as f:
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
    database of the sweep's own, so that the results database holds each point once). The
    tables of a new database and the sweep run's host fields (hostname, CPU, fingerprint, ...)
    are copied from there, as cpullm itself created and detected them. Resuming: the last
    unfinished sweep run of the same command on this host is continued (as bench --resume
    does), and an evaluation already stored is not written twice."""

    RUN_FIELDS = ("git_commit", "host", "cpu_model", "cores", "sockets", "numa_nodes", "memory_bytes", "kernel",
                  "isa_level", "governor", "fingerprint")

    def __init__(self, path, bench_db, command, workload, source_format):
        self.path, self.bench_db, self.command, self.workload = path, bench_db, command, workload
        self.source_format, self.run_id = source_format, None

    def _connect(self):
        db = sqlite3.connect(self.path, timeout=30)
        db.execute("PRAGMA foreign_keys = ON")
        return db

    def _host(self, bench):
        """The host fields of bench's latest run here (None before bench has run once)."""
        row = bench.execute(f"SELECT {', '.join(self.RUN_FIELDS)} FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        return dict(zip(self.RUN_FIELDS, row)) if row else None

    def _open_run(self, db):
        """This sweep's run: the unfinished one of the same command on this host, or a new one."""
        with sqlite3.connect(self.bench_db, timeout=30) as bench:
            if not db.execute("SELECT name FROM sqlite_master WHERE name = 'runs'").fetchone():
                for (sql,) in bench.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid"):
                    db.execute(sql)
                db.executemany("INSERT INTO schema_version VALUES (?)", bench.execute("SELECT version FROM schema_version"))
            host = self._host(bench)
        row = db.execute("SELECT id FROM runs WHERE kind = 'sweep' AND command = ? AND host = ? AND fingerprint = ? "
                         "AND finished_at IS NULL ORDER BY id DESC LIMIT 1",
                         (self.command, host["host"], host["fingerprint"])).fetchone()
        if row:
            return row[0]
        fields = ("kind", "command", "started_at") + self.RUN_FIELDS
        values = ("sweep", self.command, utc_now()) + tuple(host[f] for f in self.RUN_FIELDS)
        return db.execute(f"INSERT INTO runs ({', '.join(fields)}) VALUES ({', '.join('?' * len(fields))})",
                          values).lastrowid

    def record(self, result, model_path):
        """Stores a finished evaluation (once: a case already in the run is left as it is).
        model_path: the file as bench was given it; the model's type, size and parameters are
        taken from bench's rows for it, the ISA from the host (the sweep does not set --isa)."""
        if result["error"] or not result["samples"] or not os.path.exists(self.bench_db):
            return
        with sqlite3.connect(self.bench_db, timeout=30) as bench:
            model = bench.execute("SELECT model_type, model_size, model_n_params FROM results WHERE model_filename = ? "
                                  "ORDER BY id DESC LIMIT 1", (model_path,)).fetchone() or (None, None, None)
            isa = bench.execute("SELECT isa_level FROM runs ORDER BY id DESC LIMIT 1").fetchone()[0]
        with self._connect() as db:
            if self.run_id is None:
                self.run_id = self._open_run(db)
            case = f"sweep/{result['level']}/{result['key']}"
            if db.execute("SELECT 1 FROM results WHERE run_id = ? AND case_name = ?", (self.run_id, case)).fetchone():
                return
            point, m = result["point"], result["metrics"]
            mean = lambda name: m[name]["mean"] if name in m else None
            decode = [s["decode_tps"] for s in result["samples"]]
            row = {"run_id": self.run_id, "case_name": case, "test": "pg", "model_filename": os.path.abspath(model_path),
                   "model_type": model[0], "model_size": model[1], "model_n_params": model[2], "isa": isa,
                   "format": point.get("format", self.source_format), "n_threads": point.get("threads"),
                   "binding": point.get("bind"), "cpuset": point.get("cpuset"), "attn_tile": point.get("attn_tile"),
                   "kv_type": point.get("kv_type"), "n_batch": point.get("batch"), "n_seq": point.get("sequences", 1),
                   "placement": point.get("placement"), "prefetch": point.get("prefetch"),
                   "n_prompt": self.workload["prompt"], "n_gen": self.workload["gen"],
                   "config_json": json.dumps(dict(point, level=result["level"], **self.workload), sort_keys=True),
                   "avg_ts": mean("decode_tps"), "stddev_ts": stddev(decode), "ttft_ms": mean("ttft_ms"),
                   "tpot_ms": mean("tpot_ms"), "itl_p99_ms": mean("itl_p99_ms"),
                   "metrics_json": json.dumps({"level": result["level"], "value": result["value"], "metrics": m}),
                   "test_time": utc_now()}
            result_id = db.execute(f"INSERT INTO results ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                                   tuple(row.values())).lastrowid
            # ns: the repetition's prompt and generation time, TTFT plus the generated tokens at their rate.
            db.executemany("INSERT INTO samples (result_id, repetition, ns, ts, metrics_json) VALUES (?, ?, ?, ?, ?)",
                           [(result_id, i, (s["ttft_ms"] * 1e6 + self.workload["gen"] / s["decode_tps"] * 1e9),
                             s["decode_tps"], json.dumps(s)) for i, s in enumerate(result["samples"])])

    def finish(self):
        if self.run_id is not None:
            with self._connect() as db:
                db.execute("UPDATE runs SET finished_at = ? WHERE id = ?", (utc_now(), self.run_id))


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
    with open(path, "w") as f:
        f.write("".join(f"# {c}\n" for c in comment_lines) + tomli_w.dumps(config))
