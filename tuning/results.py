"""What a sweep keeps: one JSON line per finished evaluation in OUT/sweep-state.jsonl (written
and flushed as each finishes, so an interrupted sweep resumes without repeating one), the sweep
table, and the best configuration per objective as a CLI11 TOML config file."""
import json
import math
import os

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
    """The evaluations finished so far, by (point key, level)."""

    def __init__(self, path, resume):
        self.path, self.done = path, {}
        if os.path.exists(path):
            if not resume:
                raise FileExistsError(f"{path}: a sweep was already run here; --resume continues it, or choose another --out")
            with open(path) as f:
                for line in f:
                    if line.strip():
                        r = json.loads(line)
                        self.done[(r["key"], r["level"])] = r

    def get(self, point, level):
        return self.done.get((point_key(point), level))

    def add(self, result):
        self.done[(result["key"], result["level"])] = result
        with open(self.path, "a") as f:
            f.write(json.dumps(result) + "\n")
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


def toml_value(v):
    return json.dumps(v) if isinstance(v, str) else repr(v)


# Options `cpullm bench` has and `generate` lacks: they go in a [bench] section, which generate's
# --config skips (cli/config_file: keys at the top or under the subcommand's name).
BENCH_ONLY = {"placement", "batch-size"}


def write_config(path, model, point, comment_lines):
    """The point as a config file for `cpullm generate/bench --config FILE`: long option names,
    the options both commands have at the top, bench's own under [bench]."""
    common, bench = [f"model = {toml_value(model)}"], []
    for key, value in point.items():
        name = DIMENSIONS[key][1]
        if name and key != "sparsity":
            (bench if name in BENCH_ONLY else common).append(f"{name} = {toml_value(value)}")
    lines = [f"# {c}" for c in comment_lines] + common + (["", "[bench]"] + bench if bench else [])
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
