#!/usr/bin/python3
"""End-to-end checks of `cpullm bench` on a tiny synthetic model (seconds, not a benchmark).

Every output format read back by its own parser (json, jsonl, csv, sql through sqlite3, the
markdown table), llama-bench's field names and combination counts for lists and ranges,
-np sequences, --workload (with its quantized model written on the fly), --config, --cold,
--inject-delay-ms raising the time per output token by about the delay, --db writing one row
per point and --resume finishing a killed run without repeating its points, the load
scenario's accounting (every request finishes, TTFT <= end to end, batching happens, the rate
search answers), the multi-process scenario's sharing, and bad flags ending in one clear error.

Usage: test_bench_cli.py --cpullm BIN --workdir DIR
"""
import csv
import io
import json
import os
import sqlite3
import subprocess
import sys
import time

from cli_checks import check, expect_error, parse_context, run, run_checks, write_tiny_model

LLAMA_BENCH_FIELDS = ["build_commit", "cpu_info", "backends", "model_filename", "model_type", "model_size",
                      "model_n_params", "n_batch", "n_threads", "type_k", "type_v", "n_prompt", "n_gen", "test_time",
                      "avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "samples_ns", "samples_ts"]
CPULLM_FIELDS = ["format", "isa", "attn_tile", "binding", "cpuset", "placement", "kv_type", "n_seq", "prefetch",
                 "ttft_ms", "tpot_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms", "peak_rss_bytes", "energy_j"]


def bench(ctx, *args, expect_ok=True):
    return run([ctx.cpullm, "bench", "-m", ctx.tiny, "-t", "1", *args], expect_ok=expect_ok)


def bench_json(ctx, *args):
    return json.loads(bench(ctx, *args, "-o", "json").stdout)


@check
def tiny_model(ctx):
    write_tiny_model(ctx.cpullm, ctx.tiny)


@check
def json_has_llama_bench_fields_and_every_test(ctx):
    records = bench_json(ctx, "-p", "8,16", "-n", "4", "-r", "2")
    assert [(r["n_prompt"], r["n_gen"]) for r in records] == [(8, 0), (16, 0), (0, 4)], records
    for r in records:
        missing = [f for f in LLAMA_BENCH_FIELDS + CPULLM_FIELDS if f not in r]
        assert not missing, f"missing fields {missing}"
        assert len(r["samples_ns"]) == 2 and len(r["samples_ts"]) == 2 and r["avg_ts"] > 0
        assert r["model_filename"] == ctx.tiny and r["format"] == "f32" and r["n_threads"] == 1
        assert r["peak_rss_bytes"] > 0 and r["ttft_ms"] > 0
    pp, tg = records[0], records[2]
    assert pp["test"] == "pp8" and pp["tpot_ms"] is None, pp  # no generated tokens, no time per token
    assert tg["test"] == "tg4" and tg["itl_p50_ms"] <= tg["itl_p99_ms"], tg
    # avg_ts is tokens over the repetition's time, as llama-bench computes it
    expected = 8 / (pp["samples_ns"][0] / 1e9)
    assert abs(pp["samples_ts"][0] - expected) < 1e-6 * expected, (pp["samples_ts"], expected)


@check
def ranges_and_lists_run_every_combination(ctx):
    lines = run([ctx.cpullm, "bench", "-m", ctx.tiny, "-p", "4-16*2", "-n", "0", "-t", "1,2", "-r", "1", "-o", "jsonl"]).stdout.splitlines()
    records = [json.loads(line) for line in lines]
    assert [(r["n_threads"], r["n_prompt"]) for r in records] == [(1, 4), (1, 8), (1, 16), (2, 4), (2, 8), (2, 16)]
    records = bench_json(ctx, "-p", "0", "-n", "2", "-pg", "8,2", "-np", "1,3", "-r", "1")
    assert [(r["n_seq"], r["test"]) for r in records] == [(1, "tg2"), (1, "pp8+tg2"), (3, "tg2"), (3, "pp8+tg2")]
    # three sequences process three times the tokens of one in each repetition
    assert abs(records[3]["samples_ts"][0] * records[3]["samples_ns"][0] / 1e9 - 3 * 10) < 1e-6


@check
def llama_bench_numa_modes_map_onto_cpullm(ctx):
    for mode, binding in [("distribute", "numa"), ("isolate", "compact"), ("numactl", "none")]:
        [r] = bench_json(ctx, "-p", "8", "-n", "0", "-r", "1", "--numa", mode)
        # On one NUMA node a numa binding reduces to what the machine offers; the mode is kept.
        assert r["numa"] == mode and r["placement"] == "first-touch", r
        if mode != "distribute":
            assert r["binding"] == binding, r
        if mode == "isolate":
            assert r["cpuset"], r  # the CPUs of the node the process started on


@check
def csv_reads_back(ctx):
    rows = list(csv.DictReader(io.StringIO(bench(ctx, "-p", "8", "-n", "4", "-r", "1", "-o", "csv").stdout)))
    assert len(rows) == 2 and rows[0]["n_prompt"] == "8" and rows[1]["n_gen"] == "4", rows
    assert "samples_ns" not in rows[0] and float(rows[0]["avg_ts"]) > 0  # arrays are left out, as llama-bench


@check
def sql_loads_into_sqlite(ctx):
    sql = bench(ctx, "-p", "8", "-n", "4", "-r", "1", "-o", "sql").stdout
    db = sqlite3.connect(":memory:")
    db.executescript(sql)
    rows = db.execute("SELECT n_prompt, n_gen, avg_ts, model_filename FROM test ORDER BY n_gen").fetchall()
    assert [(r[0], r[1]) for r in rows] == [(8, 0), (0, 4)] and rows[0][2] > 0 and rows[0][3] == ctx.tiny, rows


@check
def markdown_table(ctx):
    lines = bench(ctx, "-p", "8", "-n", "4", "-r", "1", "-b", "4,8").stdout.splitlines()
    assert lines[0].startswith("| model | size | params | backend | threads | isa | n_batch |"), lines[0]
    assert "| test | t/s |" in lines[0] and len(lines) == 2 + 4, lines
    assert all(line.count("|") == lines[0].count("|") for line in lines), lines
    assert " ± " in lines[2]


@check
def workloads_write_their_models(ctx):
    for name, n_seq, fmt in [("ci-tiny", 1, "f32"), ("ci-tiny-batch", 4, "q8_0")]:
        proc = run([ctx.cpullm, "bench", "--workload", name, "--workload-dir", ctx.workdir, "-t", "1", "-o", "json"])
        [r] = json.loads(proc.stdout)
        assert (r["test"], r["n_seq"], r["format"], len(r["samples_ns"])) == ("pp16+tg8", n_seq, fmt, 2), r
        assert os.path.isfile(os.path.join(ctx.workdir, f"{name}-{fmt}.gguf"))


@check
def config_file_takes_long_option_names(ctx):
    config = os.path.join(ctx.workdir, "bench.toml")
    with open(config, "w") as f:
        f.write('n-prompt = ["0"]\nn-gen = ["3"]\nrepetitions = 1\noutput = "json"\nkv-type = ["f16"]\n')
    [r] = json.loads(bench(ctx, "--config", config).stdout)
    assert (r["test"], len(r["samples_ns"]), r["kv_type"]) == ("tg3", 1, "f16"), r


@check
def cold_start_drops_the_page_cache(ctx):
    [r] = bench_json(ctx, "-p", "8", "-n", "0", "-r", "2", "--cold")
    assert r["cold"] and r["ttft_ms"] > 0
    return f"cold TTFT {r['ttft_ms']:.2f} ms; notes: {r['notes'] or 'none'}"


@check
def injected_delay_raises_time_per_token(ctx):
    delay = 25
    plain, slowed = [bench_json(ctx, "-p", "0", "-n", "6", "-r", "2", "--inject-delay-ms", str(d))[0] for d in (0, delay)]
    added = slowed["tpot_ms"] - plain["tpot_ms"]
    assert 0.9 * delay < added < 1.5 * delay + 5, (plain["tpot_ms"], slowed["tpot_ms"])
    return f"tpot {plain['tpot_ms']:.2f} -> {slowed['tpot_ms']:.2f} ms with {delay} ms injected"


def results_rows(path, run_id=None):
    db = sqlite3.connect(path)
    where = f" WHERE run_id = {run_id}" if run_id else ""
    return db.execute(f"SELECT run_id, case_name, n_prompt, n_gen, avg_ts FROM results{where} ORDER BY id").fetchall()


@check
def db_stores_every_point_and_resume_finishes_a_killed_run(ctx):
    path = os.path.join(ctx.workdir, "results.db")
    for leftover in [path, path + "-wal", path + "-shm"]:
        if os.path.exists(leftover):
            os.remove(leftover)
    bench(ctx, "-p", "8", "-n", "4", "-r", "1", "--db", path)
    rows = results_rows(path)
    assert [(r[2], r[3]) for r in rows] == [(8, 0), (0, 4)] and all(r[4] > 0 for r in rows), rows
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM samples").fetchone()[0] == 2
    assert db.execute("SELECT finished_at IS NOT NULL FROM runs").fetchone()[0] == 1

    # A run killed after its first point: --resume runs only the second.
    args = [ctx.cpullm, "bench", "-m", ctx.tiny, "-t", "1", "-p", "8", "-n", "4", "-r", "3", "--inject-delay-ms", "300",
            "-o", "jsonl", "--db", path]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while len(results_rows(path)) < 3 and time.time() < deadline:
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    killed_run = results_rows(path)[-1][0]
    assert len(results_rows(path, killed_run)) == 1, "the killed run should hold its first point only"
    resumed = run(args + ["--resume"]).stdout.splitlines()
    assert [json.loads(line)["test"] for line in resumed] == ["tg4"], resumed
    assert [r[1].split("/")[1] for r in results_rows(path, killed_run)] == ["pp8", "tg4"]
    assert db.execute("SELECT finished_at IS NOT NULL FROM runs WHERE id = ?", (killed_run,)).fetchone()[0] == 1


@check
def load_scenario_accounting(ctx):
    records = bench_json(ctx, "--load", "-pg", "16,6", "-np", "3", "--rate", "400", "--requests", "12")
    [r] = records
    ttft, e2e = r["ttft_samples_ms"], r["e2e_samples_ms"]
    assert r["requests"] == 12 and len(ttft) == 12 and len(e2e) == 12, r  # every request finished
    assert all(0 < t <= e for t, e in zip(ttft, e2e)), (ttft, e2e)
    assert r["ttft_p50_ms"] <= r["ttft_p99_ms"] and r["tpot_p50_ms"] <= r["tpot_p99_ms"]
    assert r["max_batch_tokens"] > 3, "requests arriving at 400/s should share forward calls"
    assert r["avg_ts"] > 0 and r["bounds_met"] is None
    return f"{r['forward_calls']} forward calls, largest {r['max_batch_tokens']} tokens, {r['avg_ts']:.0f} gen t/s"


@check
def load_rate_search(ctx):
    path = os.path.join(ctx.workdir, "load.db")
    if os.path.exists(path):
        os.remove(path)
    records = bench_json(ctx, "--load", "-pg", "8,4", "-np", "2", "--rate", "200", "--requests", "8",
                         "--ttft-bound-ms", "1000", "--tpot-bound-ms", "1000", "--search-rate", "--search-steps", "1",
                         "--db", path)
    assert all(r["bounds_met"] is not None for r in records)
    best = [r for r in records if r["test"] == "load-max-rate"]
    assert len(best) == 1 and best[0]["bounds_met"], records
    assert best[0]["rate"] == max(r["rate"] for r in records if r["bounds_met"])
    rates = [r["rate"] for r in records if r["test"] == "load"]
    assert len(rates) == len(set(rates)), rates  # the search reuses the runs it has
    assert len(results_rows(path)) == len(records), "every run and the answer are stored"
    return f"highest rate meeting 1 s bounds: {best[0]['rate']:.4g} req/s over {len(records) - 1} runs"


@check
def multi_process_sharing(ctx):
    model = os.path.join(ctx.workdir, "sharing.gguf")
    run([ctx.cpullm, "gen-model", "--shape", "custom", "--layers", "2", "--dim", "256", "--ffn", "768", "--heads", "4",
         "--vocab", "8000", "--dtype", "f32", "-o", model])
    [r] = json.loads(run([ctx.cpullm, "bench", "-m", model, "-t", "1", "--processes", "2", "-o", "json"]).stdout)
    assert r["processes"] == 2 and r["model_sum_rss_bytes"] >= 2 * 0.95 * r["touched_bytes"], r
    # Two processes sharing every page of the model: each holds half of it in Pss.
    assert 0.45 < r["model_saved_fraction"] <= 0.5 + 1e-9, r
    # The whole processes' figure also counts shared libraries, whose Pss divides among every
    # process on the machine using them: it is reported, but only the model's figure is exact.
    assert 0 < r["saved_fraction"] < 1 and r["sum_pss_bytes"] < r["sum_rss_bytes"], r
    return f"saved {100 * r['saved_fraction']:.1f}% overall, {100 * r['model_saved_fraction']:.1f}% of the model's pages"


@check
def bad_flags_give_one_clear_error(ctx):
    base = [ctx.cpullm, "bench", "-m", ctx.tiny]
    expect_error(base + ["-p", "64-8"], "-p: range '64-8' goes downwards")
    expect_error(base + ["-t", "two"], "-t: 'two' is not a whole number")
    expect_error(base + ["--bind", "none,sideways"], "--bind: unknown value 'sideways'")
    expect_error(base + ["--kv-type", "f64"], "--kv-type: unknown value 'f64'")
    expect_error(base + ["-pg", "512"], "-pg: '512' is not PROMPT,GEN")
    expect_error(base + ["--attn-tile", "0x8"], "0x8")
    expect_error(base + ["-p", "0", "-n", "0"], "nothing to run")
    expect_error(base + ["--resume"], "--resume needs --db")
    expect_error(base + ["--load", "-p", "8"], "--load needs the request lengths")
    expect_error(base + ["--load", "-pg", "8,4", "--rate", "0"], "--rate: 0 is not a positive rate")
    expect_error(base + ["--load", "-pg", "8,4", "--search-rate"], "--search-rate needs")
    expect_error([ctx.cpullm, "bench", "-m", ctx.tiny + ".missing", "-r", "1"], ".missing")
    expect_error([ctx.cpullm, "bench", "--workload", "nope"], "no workload named 'nope'")
    expect_error([ctx.cpullm, "bench", "-p", "8"], "give a model")


def main():
    ctx = parse_context(__doc__)
    ctx.tiny = os.path.join(ctx.workdir, "tiny.gguf")
    return run_checks(ctx)


if __name__ == "__main__":
    sys.exit(main())
