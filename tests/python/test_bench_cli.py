"""End-to-end checks of `cpullm bench` on a tiny synthetic model (seconds, not a benchmark).

Every output format read back by its own parser (json, jsonl, csv, sql through sqlite3, the
markdown table), llama-bench's field names and combination counts for lists and ranges,
-np sequences, --workload (with its quantized model written on the fly), --config, --cold,
--inject-delay-ms raising the time per output token by about the delay, --db writing one row
per point and --resume finishing a killed run without repeating its points, --db's regions from
an extra instrumented repetition kept out of the timings, energy_j from a fake RAPL tree (with a
counter wrap) or NULL with the reason, the load scenario's accounting (every request finishes,
TTFT <= end to end, batching happens, the rate search answers), the multi-process scenario's
sharing (and its database row), --roof-pairs pairing every counted decode step with a read of
memory (the step's weight bytes counted independently here), and bad flags ending in one clear
error.
"""
import csv
import io
import json
import os
import sqlite3
import subprocess
import threading
import time

import pytest

from cli_checks import expect_error, run, write_tiny_model

LLAMA_BENCH_FIELDS = ["build_commit", "cpu_info", "backends", "model_filename", "model_type", "model_size",
                      "model_n_params", "n_batch", "n_threads", "type_k", "type_v", "n_prompt", "n_gen", "n_depth",
                      "test_time",
                      "avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "samples_ns", "samples_ts"]
CPULLM_FIELDS = ["format", "isa", "attn_tile", "binding", "cpuset", "placement", "kv_type", "n_seq", "prefetch",
                 "ttft_ms", "tpot_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms", "peak_rss_bytes", "energy_j",
                 "model_huge_page_bytes"]


def bench(ctx, *args, expect_ok=True):
    return run([ctx.cpullm, "bench", "-m", ctx.tiny, "-t", "1", *args], expect_ok=expect_ok)


def bench_json(ctx, *args):
    return json.loads(bench(ctx, *args, "-o", "json").stdout)


def test_tiny_model(ctx):
    write_tiny_model(ctx.cpullm, ctx.tiny)


def test_json_has_llama_bench_fields_and_every_test(ctx):
    records = bench_json(ctx, "-p", "8,16", "-n", "4", "-r", "2")
    assert [(r["n_prompt"], r["n_gen"]) for r in records] == [(8, 0), (16, 0), (0, 4)], records
    for r in records:
        missing = [f for f in LLAMA_BENCH_FIELDS + CPULLM_FIELDS if f not in r]
        assert not missing, f"missing fields {missing}"
        assert len(r["samples_ns"]) == 2 and len(r["samples_ts"]) == 2 and r["avg_ts"] > 0
        assert r["model_filename"] == ctx.tiny and r["format"] == "f32" and r["n_threads"] == 1
        assert r["peak_rss_bytes"] > 0 and r["ttft_ms"] > 0
        assert r["model_huge_page_bytes"] is None or 0 <= r["model_huge_page_bytes"] <= os.path.getsize(ctx.tiny), r
    pp, tg = records[0], records[2]
    assert pp["test"] == "pp8" and pp["tpot_ms"] is None, pp  # no generated tokens, no time per token
    assert tg["test"] == "tg4" and tg["itl_p50_ms"] <= tg["itl_p99_ms"], tg
    # avg_ts is tokens over the repetition's time, as llama-bench computes it
    expected = 8 / (pp["samples_ns"][0] / 1e9)
    assert abs(pp["samples_ts"][0] - expected) < 1e-6 * expected, (pp["samples_ts"], expected)


def test_depth_fills_the_context_before_each_test(ctx):
    """-d as llama-bench's: every test again at each depth, named "tg4 @ d64"; the fill is outside
    the timed repetitions, and the tests run after it: the instrumented repetition's attention,
    whose analytic cost grows with the positions it reads, counts more work at depth."""
    records = bench_json(ctx, "-p", "8", "-n", "4", "-d", "0,64", "-r", "1")
    assert [(r["test"], r["n_depth"]) for r in records] == [("pp8", 0), ("tg4", 0), ("pp8 @ d64", 64), ("tg4 @ d64", 64)]
    assert len({r["case_name"] for r in records}) == 4, [r["case_name"] for r in records]
    flops = {}
    for depth in (0, 64):
        path = fresh_db(ctx, f"depth{depth}.db")
        bench(ctx, "-p", "0", "-n", "4", "-d", str(depth), "-r", "1", "--db", path)
        result, _, _, regions = stored_point(path)
        assert result["n_depth"] == depth, result
        flops[depth] = regions["attention"]["flops"]
    assert flops[64] > 2 * flops[0], flops  # 4 steps over 1..4 positions, against 65..68
    expect_error([ctx.cpullm, "bench", "-m", ctx.tiny, "-d", "8", "--cold"], "-d with --cold")
    expect_error([ctx.cpullm, "bench", "-m", ctx.tiny, "-d", "8", "--load", "-pg", "8,4"], "-d fills the context")


def test_ranges_and_lists_run_every_combination(ctx):
    lines = run([ctx.cpullm, "bench", "-m", ctx.tiny, "-p", "4-16*2", "-n", "0", "-t", "1,2", "-r", "1", "-o", "jsonl"]).stdout.splitlines()
    records = [json.loads(line) for line in lines]
    assert [(r["n_threads"], r["n_prompt"]) for r in records] == [(1, 4), (1, 8), (1, 16), (2, 4), (2, 8), (2, 16)]
    records = bench_json(ctx, "-p", "0", "-n", "2", "-pg", "8,2", "-np", "1,3", "-r", "1")
    assert [(r["n_seq"], r["test"]) for r in records] == [(1, "tg2"), (1, "pp8+tg2"), (3, "tg2"), (3, "pp8+tg2")]
    # three sequences process three times the tokens of one in each repetition
    assert abs(records[3]["samples_ts"][0] * records[3]["samples_ns"][0] / 1e9 - 3 * 10) < 1e-6
    # avg_ts counts prompt and generated tokens (llama-bench's); gen_ts only the generated ones over
    # the whole repetition, prefill included, and prompt_ts the prompts over the prefill's time.
    pg, tg = records[3], records[2]
    assert abs(pg["gen_ts"] - 3 * 2 / (pg["samples_ns"][0] / 1e9)) < 1e-6 * pg["gen_ts"], pg
    assert abs(pg["prompt_ts"] - 3 * 8 / (pg["ttft_ms"] / 1e3)) < 1e-6 * pg["prompt_ts"], pg
    assert pg["gen_ts"] < pg["avg_ts"] / 4, "10 tokens a sequence counted, 2 generated"
    assert tg["prompt_ts"] is None and abs(tg["gen_ts"] - tg["avg_ts"]) < 1e-6 * tg["avg_ts"], tg


def test_llama_bench_numa_modes_map_onto_cpullm(ctx):
    for mode, binding in [("distribute", "numa"), ("isolate", "compact"), ("numactl", "none")]:
        [r] = bench_json(ctx, "-p", "8", "-n", "0", "-r", "1", "--numa", mode)
        # On one NUMA node a numa binding reduces to what the machine offers; the mode is kept.
        assert r["numa"] == mode and r["placement"] == "first-touch", r
        if mode != "distribute":
            assert r["binding"] == binding, r
        if mode == "isolate":
            assert r["cpuset"], r  # the CPUs of the node the process started on


def test_csv_reads_back(ctx):
    rows = list(csv.DictReader(io.StringIO(bench(ctx, "-p", "8", "-n", "4", "-r", "1", "-o", "csv").stdout)))
    assert len(rows) == 2 and rows[0]["n_prompt"] == "8" and rows[1]["n_gen"] == "4", rows
    assert "samples_ns" not in rows[0] and float(rows[0]["avg_ts"]) > 0  # arrays are left out, as llama-bench


def test_sql_loads_into_sqlite(ctx):
    sql = bench(ctx, "-p", "8", "-n", "4", "-r", "1", "-o", "sql").stdout
    db = sqlite3.connect(":memory:")
    db.executescript(sql)
    rows = db.execute("SELECT n_prompt, n_gen, avg_ts, model_filename FROM test ORDER BY n_gen").fetchall()
    assert [(r[0], r[1]) for r in rows] == [(8, 0), (0, 4)] and rows[0][2] > 0 and rows[0][3] == ctx.tiny, rows


def test_markdown_table(ctx):
    lines = bench(ctx, "-p", "8", "-n", "4", "-r", "1", "-b", "4,8").stdout.splitlines()
    assert lines[0].startswith("| model | size | params | backend | threads | isa | n_batch |"), lines[0]
    assert "| test | t/s |" in lines[0] and len(lines) == 2 + 4, lines
    assert all(line.count("|") == lines[0].count("|") for line in lines), lines
    assert " ± " in lines[2]


def test_workloads_write_their_models(ctx):
    for name, n_seq, fmt in [("ci-tiny", 1, "f32"), ("ci-tiny-batch", 4, "q8_0")]:
        proc = run([ctx.cpullm, "bench", "--workload", name, "--workload-dir", ctx.workdir, "-t", "1", "-o", "json"])
        [r] = json.loads(proc.stdout)
        assert (r["test"], r["n_seq"], r["format"], len(r["samples_ns"])) == ("pp16+tg8", n_seq, fmt, 2), r
        assert os.path.isfile(os.path.join(ctx.workdir, f"{name}-{fmt}.gguf"))


def test_config_file_takes_long_option_names(ctx):
    config = os.path.join(ctx.workdir, "bench.toml")
    with open(config, "w") as f:
        f.write('n-prompt = ["0"]\nn-gen = ["3"]\nrepetitions = 1\noutput = "json"\nkv-type = ["f16"]\n')
    [r] = json.loads(bench(ctx, "--config", config).stdout)
    assert (r["test"], len(r["samples_ns"]), r["kv_type"]) == ("tg3", 1, "f16"), r


def test_cold_start_drops_the_page_cache(ctx):
    [r] = bench_json(ctx, "-p", "8", "-n", "0", "-r", "2", "--cold")
    assert r["cold"] and r["ttft_ms"] > 0
    print(f"cold TTFT {r['ttft_ms']:.2f} ms; notes: {r['notes'] or 'none'}")


def test_injected_delay_raises_time_per_token(ctx):
    delay = 25
    plain, slowed = [bench_json(ctx, "-p", "0", "-n", "6", "-r", "2", "--inject-delay-ms", str(d))[0] for d in (0, delay)]
    added = slowed["tpot_ms"] - plain["tpot_ms"]
    assert 0.9 * delay < added < 1.5 * delay + 5, (plain["tpot_ms"], slowed["tpot_ms"])
    print(f"tpot {plain['tpot_ms']:.2f} -> {slowed['tpot_ms']:.2f} ms with {delay} ms injected")


def results_rows(path, run_id=None):
    db = sqlite3.connect(path)
    where = f" WHERE run_id = {run_id}" if run_id else ""
    return db.execute(f"SELECT run_id, case_name, n_prompt, n_gen, avg_ts FROM results{where} ORDER BY id").fetchall()


def test_db_stores_every_point_and_resume_finishes_a_killed_run(ctx):
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


REGIONS = ["embedding", "attn_norm", "q_proj", "k_proj", "v_proj", "rope", "attention", "o_proj", "ffn_norm", "ffn_gate",
           "ffn_up", "ffn_act", "ffn_down", "final_norm", "lm_head", "sampling"]


def fresh_db(ctx, name):
    path = os.path.join(ctx.workdir, name)
    for leftover in [path, path + "-wal", path + "-shm"]:
        if os.path.exists(leftover):
            os.remove(leftover)
    return path


def stored_point(path):
    """The only result of the database: its row, metrics and regions (name -> row)."""
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    [result] = db.execute("SELECT * FROM results").fetchall()
    samples = [r["ns"] for r in db.execute("SELECT ns FROM samples WHERE result_id = ? ORDER BY repetition", (result["id"],))]
    regions = {r["name"]: dict(r) for r in db.execute("SELECT * FROM regions WHERE result_id = ?", (result["id"],))}
    return dict(result), json.loads(result["metrics_json"]), samples, regions


def test_db_stores_every_region_from_an_extra_instrumented_repetition(ctx):
    path = fresh_db(ctx, "regions.db")
    delay_ms = 30  # in the timed repetitions only: the instrumented one sleeps in no region, so it skips the delay
    out = bench(ctx, "-p", "0", "-n", "0", "-pg", "8,4", "-r", "2", "--inject-delay-ms", str(delay_ms), "-o", "json",
                "--db", path).stdout
    [printed] = json.loads(out)
    assert not any(k in printed for k in ("regions", "profile_seconds", "energy_unavailable")), "llama-bench output unchanged"
    result, metrics, samples, regions = stored_point(path)
    assert sorted(regions) == sorted(REGIONS), sorted(regions)
    # 2 layers; the prompt in one forward call, then 4 decode steps: 5 forward calls, 4 tokens sampled.
    layers, forwards = 2, 5
    calls = {name: layers * forwards for name in REGIONS}
    calls.update(embedding=forwards, final_norm=forwards, lm_head=forwards, sampling=4)
    assert {n: r["calls"] for n, r in regions.items()} == calls, {n: r["calls"] for n, r in regions.items()}
    for name, r in regions.items():
        assert r["bytes"] > 0 and r["seconds"] > 0, r
        assert (r["flops"] == 0) == (name == "embedding"), r  # a table lookup has no arithmetic
        counters = json.loads(r["counters_json"])
        assert "task-clock" in counters or "unavailable" in counters, counters
    # The timed figures are the samples' (each over 4 x delay); the instrumented repetition is apart and shorter.
    assert len(samples) == 2 and all(ns > 4 * delay_ms * 1e6 for ns in samples), samples
    assert abs(result["avg_ns"] - sum(samples) / 2) <= 1, (result["avg_ns"], samples)
    assert 0 < metrics["profile_seconds"] < 4 * delay_ms / 1e3, metrics
    assert sum(r["seconds"] for r in regions.values()) <= metrics["profile_seconds"]
    assert metrics["roof_memory_bytes_per_s"] > 0 and metrics["roof_flops_per_s"] > 0, metrics
    assert metrics["roof_memory_source"].startswith("measured by cpullm bench"), metrics
    assert metrics["model_huge_page_bytes"] == printed["model_huge_page_bytes"], (metrics, printed)  # page sizes kept
    note = (f"{len(regions)} regions; samples {[round(ns / 1e6, 1) for ns in samples]} ms, "
            f"instrumented {metrics['profile_seconds'] * 1e3:.1f} ms")
    # --no-regions: the point alone, as before the profile existed.
    path = fresh_db(ctx, "no-regions.db")
    bench(ctx, "-p", "8", "-n", "0", "-r", "1", "--db", path, "--no-regions")
    _, metrics, _, regions = stored_point(path)
    assert not regions and "profile_seconds" not in metrics and "roof_flops_per_s" not in metrics, (regions, metrics)
    print(note)


class FakePowercap:
    """A powercap tree whose package counter advances at package_w watts in real time and wraps
    at range_uj (as RAPL's energy_uj does), next to a DRAM domain at dram_w; rewritten every
    millisecond by a thread, each file replaced whole so a reader never sees half a number."""

    def __init__(self, root, package_w, dram_w, range_uj):
        self.root, self.package_w, self.dram_w, self.range_uj = root, package_w, dram_w, range_uj
        self.wraps = 0
        for zone, name, limit in (("intel-rapl:0", "package-0", range_uj), ("intel-rapl:0:0", "dram", 2**40)):
            os.makedirs(os.path.join(root, zone), exist_ok=True)
            for file, text in (("name", name), ("max_energy_range_uj", str(limit))):
                with open(os.path.join(root, zone, file), "w") as f:
                    f.write(text + "\n")
        self.start = time.monotonic()
        self.running = True
        self.write()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def put(self, zone, value):
        path = os.path.join(self.root, zone, "energy_uj")
        with open(path + ".new", "w") as f:
            f.write(f"{value}\n")
        os.replace(path + ".new", path)

    def write(self):
        elapsed = time.monotonic() - self.start
        package = int(self.range_uj * 0.9 + elapsed * self.package_w * 1e6)  # starts near the top: wraps early
        self.wraps = package // self.range_uj
        self.put("intel-rapl:0", package % self.range_uj)
        self.put("intel-rapl:0:0", int(elapsed * self.dram_w * 1e6))

    def loop(self):
        while self.running:
            self.write()
            time.sleep(0.001)

    def stop(self):
        self.running = False
        self.thread.join()


def test_energy_from_rapl_or_why_not(ctx):
    # The machine the test runs on first: RAPL's joules, or NULL and the reason (a VM may have no
    # /sys/class/powercap).
    path = fresh_db(ctx, "energy-host.db")
    bench(ctx, "-p", "8", "-n", "0", "-r", "1", "--db", path)
    result, metrics, _, _ = stored_point(path)
    host_note = "this host: RAPL measured" if result["energy_j"] is not None else f"this host: {metrics['energy_unavailable']}"
    assert (result["energy_j"] is None) == ("energy_unavailable" in metrics), (result["energy_j"], metrics)
    if result["energy_j"] is None:
        assert metrics["energy_unavailable"].startswith("unavailable here: "), metrics

    # A fake tree: package 50 W wrapping every second, DRAM 10 W. Four repetitions of over 400 ms
    # each (4 tokens, 100 ms injected after each; well under a second) span a wrap for certain,
    # and the thread's lag behind real time is a small part of each.
    root = os.path.join(ctx.workdir, "powercap")
    fake = FakePowercap(root, package_w=50, dram_w=10, range_uj=50_000_000)
    try:
        path = fresh_db(ctx, "energy-fake.db")
        env_bench = [ctx.cpullm, "bench", "-m", ctx.tiny, "-t", "1", "-p", "0", "-n", "4", "-r", "4",
                     "--inject-delay-ms", "100", "-o", "json", "--db", path]
        proc = subprocess.run(env_bench, capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, CPULLM_POWERCAP_ROOT=root))
    finally:
        fake.stop()
    assert proc.returncode == 0, proc.stderr
    assert fake.wraps >= 2, "the package counter should have wrapped during the run"
    [printed] = json.loads(proc.stdout)
    result, metrics, samples, _ = stored_point(path)
    seconds = sum(samples) / len(samples) / 1e9
    watts = result["energy_j"] / seconds
    assert 0.75 * 60 < watts < 1.25 * 60, (result["energy_j"], seconds)  # a wrap mishandled: off by the range, 50 J, or more
    assert printed["energy_j"] == result["energy_j"], (printed["energy_j"], result["energy_j"])
    assert abs(metrics["energy_j_per_generated_token"] - result["energy_j"] / 4) < 1e-9, metrics
    assert "energy_unavailable" not in metrics
    measured = f"fake RAPL: {watts:.1f} W measured of 60 W, {metrics['energy_j_per_generated_token']:.3f} J per generated token"

    # A tree without RAPL zones: NULL, and why.
    empty = os.path.join(ctx.workdir, "powercap-empty")
    os.makedirs(empty, exist_ok=True)
    path = fresh_db(ctx, "energy-none.db")
    subprocess.run([ctx.cpullm, "bench", "-m", ctx.tiny, "-t", "1", "-p", "8", "-n", "0", "-r", "1", "--db", path],
                   capture_output=True, check=True, timeout=300, env=dict(os.environ, CPULLM_POWERCAP_ROOT=empty))
    result, metrics, _, _ = stored_point(path)
    assert result["energy_j"] is None and "no intel-rapl package or dram zone" in metrics["energy_unavailable"], metrics
    print(f"{measured}; {host_note}")


def test_load_scenario_accounting(ctx):
    records = bench_json(ctx, "--load", "-pg", "16,6", "-np", "3", "--rate", "400", "--requests", "12")
    [r] = records
    ttft, e2e = r["ttft_samples_ms"], r["e2e_samples_ms"]
    assert r["requests"] == 12 and len(ttft) == 12 and len(e2e) == 12, r  # every request finished
    assert all(0 < t <= e for t, e in zip(ttft, e2e)), (ttft, e2e)
    assert r["ttft_p50_ms"] <= r["ttft_p99_ms"] and r["tpot_p50_ms"] <= r["tpot_p99_ms"]
    assert r["max_batch_tokens"] > 3, "requests arriving at 400/s should share forward calls"
    assert r["avg_ts"] > 0 and r["bounds_met"] is None
    print(f"{r['forward_calls']} forward calls, largest {r['max_batch_tokens']} tokens, {r['avg_ts']:.0f} gen t/s")


def test_load_rate_search(ctx):
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
    print(f"highest rate meeting 1 s bounds: {best[0]['rate']:.4g} req/s over {len(records) - 1} runs")


def test_multi_process_sharing(ctx):
    model = os.path.join(ctx.workdir, "sharing.gguf")
    run([ctx.cpullm, "gen-model", "--shape", "custom", "--layers", "2", "--dim", "256", "--ffn", "768", "--heads", "4",
         "--vocab", "8000", "--dtype", "f32", "-o", model])
    path = fresh_db(ctx, "sharing.db")
    [r] = json.loads(run([ctx.cpullm, "bench", "-m", model, "-t", "1", "--processes", "2", "-o", "json", "--db", path]).stdout)
    assert r["processes"] == 2 and r["model_sum_rss_bytes"] >= 2 * 0.95 * r["touched_bytes"], r
    # Two processes sharing every page of the model: each holds half of it in Pss, a saving of
    # 0.5 (without sharing: 0). Seen 0.489-0.5 alone, once 0.447 while CTest ran other jobs
    # beside it (some pages then mapped in one process only), so the bound leaves room for that.
    assert 0.4 < r["model_saved_fraction"] <= 0.5 + 1e-9, r
    # The whole processes' figure also counts shared libraries, whose Pss divides among every
    # process on the machine using them: it is reported, but only the model's figure is exact.
    assert 0 < r["saved_fraction"] < 1 and r["sum_pss_bytes"] < r["sum_rss_bytes"], r
    # Stored as the report reads it for claim C11: test multiproc, processes in the configuration.
    result, metrics, _, _ = stored_point(path)
    assert result["test"] == "multiproc" and json.loads(result["config_json"])["processes"] == 2, result
    assert metrics["model_saved_fraction"] == r["model_saved_fraction"], (metrics, r)
    print(f"saved {100 * r['saved_fraction']:.1f}% overall, {100 * r['model_saved_fraction']:.1f}% of the model's pages")


PAIRED_FIELDS = ["paired_steps", "paired_step_bytes", "paired_decode_gbs", "paired_read_gbs", "paired_roof_share",
                 "paired_roof_share_p50"]


def test_roof_pairs_pair_every_decode_step(ctx):
    tensors = json.loads(run([ctx.cpullm, "info", ctx.tiny, "--json"]).stdout)["tensors"]
    embedding = next(t for t in tensors if t["name"] == "token_embd.weight")
    tied = not any(t["name"] == "output.weight" for t in tensors)
    row = embedding["bytes"] // embedding["shape"][1]
    step_bytes = sum(t["bytes"] for t in tensors) - (0 if tied else embedding["bytes"] - row)
    tg, pg = bench_json(ctx, "-p", "0", "-n", "5", "-pg", "4,3", "-r", "1", "--roof-pairs")
    [pp] = bench_json(ctx, "-p", "8", "-n", "0", "-r", "1", "--roof-pairs")
    # A tg test counts the steps after the first token's; a pp+tg test every step after the prompt.
    assert (tg["paired_steps"], pg["paired_steps"]) == (4, 3), (tg, pg)
    for r in (tg, pg):
        assert r["paired_step_bytes"] == step_bytes, (r["paired_step_bytes"], step_bytes)
        assert r["paired_decode_gbs"] > 0 and r["paired_read_gbs"] > 0 and r["paired_roof_share_p50"] > 0, r
        assert abs(r["paired_roof_share"] - r["paired_decode_gbs"] / r["paired_read_gbs"]) < 1e-9 * r["paired_roof_share"], r
    # Nothing to pair in a prompt-only test: null, with a note; without the flag, null.
    assert all(pp[f] is None for f in PAIRED_FIELDS) and "--roof-pairs" in pp["notes"], pp
    [plain] = bench_json(ctx, "-p", "0", "-n", "3", "-r", "1")
    assert all(plain[f] is None for f in PAIRED_FIELDS), plain
    # Each further sequence of a step reads one more embedding row.
    [two] = bench_json(ctx, "-p", "0", "-n", "3", "-np", "2", "-r", "1", "--roof-pairs")
    assert two["paired_step_bytes"] == step_bytes + row, (two["paired_step_bytes"], step_bytes, row)
    header = bench(ctx, "-p", "0", "-n", "3", "-r", "1", "--roof-pairs").stdout.splitlines()[0]
    assert header.endswith("| paired GB/s | read GB/s | of roof | of roof p50 |"), header
    # With --db the database keeps them with the point's other metrics.
    path = fresh_db(ctx, "pairs.db")
    [stored] = bench_json(ctx, "-p", "0", "-n", "3", "-r", "1", "--roof-pairs", "--db", path, "--no-regions")
    _, metrics, _, _ = stored_point(path)
    assert all(metrics[f] == stored[f] for f in PAIRED_FIELDS), (metrics, stored)
    print(f"tg5: {tg['paired_decode_gbs']:.2f} GB/s of weights against {tg['paired_read_gbs']:.1f} GB/s read")


def test_bad_flags_give_one_clear_error(ctx):
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
    expect_error(base + ["--load", "-pg", "8,4", "--roof-pairs"], "--roof-pairs measures the points' decode steps")
    expect_error([ctx.cpullm, "bench", "-m", ctx.tiny + ".missing", "-r", "1"], ".missing")
    expect_error([ctx.cpullm, "bench", "--workload", "nope"], "no workload named 'nope'")
    expect_error([ctx.cpullm, "bench", "-p", "8"], "give a model")


@pytest.fixture(scope="module")
def ctx(ctx):
    ctx.tiny = os.path.join(ctx.workdir, "tiny.gguf")
    return ctx
