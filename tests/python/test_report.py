"""cpullm report end to end: a results database written by `cpullm db import` with rows like cpullm
bench and scripts/nightly write, rendered through `cpullm report` (the C++ binary execs the Python
script), then loaded in headless Chromium: no console errors, every figure drawn and non-empty,
a screenshot kept under the work directory. Also: the roofline holds every measured region
against the stored roofs (or bench's), C11 quotes the measured sharing, the TCO uses measured
energy where there is some, verdicts follow the data, bad input fails with a clear message: a
value of the wrong type in a column, a schema newer than this code, a database password is never
shown."""
import json
import os
import re
import sqlite3
import subprocess

from db_builder import Runs
from reports import browser, roofs
from reports.resultsdb import Database

HOSTS = {
    "vm": dict(host="testvm", cpu_model="AMD EPYC 9B45", cores=2, sockets=1, numa_nodes=1, memory_bytes=24 << 30, fingerprint="f-vm"),
    "e5": dict(host="e5box", cpu_model="Intel(R) Xeon(R) CPU E5-4627 v4 @ 2.60GHz", cores=40, sockets=4, numa_nodes=4,
               memory_bytes=256 << 30, fingerprint="f-e5"),
}
LLAMA_7B_PARAMS = 6_738_415_616
GPU_RESULT = dict(gpu="a100-80gb-sxm", model="llama-7b", format="f16", engine="vLLM 0.4", n_seq=32, n_prompt=512, n_gen=128,
                  tokens_per_s=1234.5, host="gpubox", date="2026-11-01", command="python benchmark_throughput.py ...")


def add_run(db, host, kind, commit, command):
    return db.add_run(kind=kind, command=command, started_at="2026-11-30T10:00:00Z", finished_at="2026-11-30T10:05:00Z",
                      git_commit=commit, isa_level="avx512", **HOSTS[host])


def add_result(db, run_id, case, samples_ns=(), regions=(), **fields):
    config = {k: fields.pop(k) for k in ("processes",) if k in fields}  # config_json only, no column
    config.update({k: fields[k] for k in ("n_threads", "n_seq", "format", "attn_tile", "prefetch", "placement") if k in fields})
    db.add_result(run_id, case_name=case, config_json=json.dumps(config), metrics_json=json.dumps(fields.pop("metrics", {})),
                  samples=[dict(repetition=i, ns=ns, ts=1e9 / ns) for i, ns in enumerate(samples_ns)],
                  regions=[dict(name=name, calls=10, seconds=seconds, flops=flops, bytes=nbytes)
                           for name, seconds, flops, nbytes in regions], **fields)


# What cpullm bench --db stores next to its regions: the roofs it measured at the point's threads.
BENCH_ROOFS = {"roof_memory_bytes_per_s": 30e9, "roof_memory_source": "measured by cpullm bench: read of 256 MiB, 2 threads, best of 5",
               "roof_flops_per_s": 200e9, "roof_compute_source": "measured by cpullm bench: avx512 FMA chains, 2 threads, best of 3"}
REGIONS = [("embedding", 0.001, 0.0, 1e6), ("q_proj", 0.01, 2e8, 1e8), ("attention", 0.02, 1e8, 4e7), ("lm_head", 0.005, 5e8, 2.5e8)]


def build_runs(int8_speedup, saved_fraction=0.71, kernels=True):
    """Runs where INT8 generation is int8_speedup times faster than F32 on the same host, 4
    processes sharing a model save saved_fraction of its memory, and (kernels) the nightly's
    kernel benchmarks stored this host's roofs."""
    db = Runs()
    bench = add_run(db, "vm", "bench", "abc1234", "cpullm bench -m tiny.gguf -t 1,2 -np 1,4 -n 16 --db r.db")
    base = dict(test="tg", model_type="llama 9M f32", model_n_params=9_000_000, n_prompt=0, n_gen=16, n_batch=512, isa="avx512")
    for threads in (1, 2):
        for n_seq in (1, 4):
            for fmt, ts in (("f32", 100.0), ("int8-channel", 100.0 * int8_speedup)):
                rate = ts * threads * (1 + 0.5 * (n_seq - 1))
                add_result(db, bench, f"tg16/t{threads}/np{n_seq}/{fmt}", samples_ns=[16e9 / rate * (1 + 0.02 * k) for k in range(5)],
                           regions=REGIONS, metrics=BENCH_ROOFS, **base, format=fmt, n_threads=threads, n_seq=n_seq, avg_ts=rate, ttft_ms=5.0 / threads,
                           tpot_ms=1000 / rate, itl_p50_ms=950 / rate, itl_p90_ms=1100 / rate, itl_p99_ms=1300 / rate)
    for tile, ts in (("8x8", 900.0), ("64x64", 1000.0)):
        for threads in (1, 2):
            add_result(db, bench, f"tg16/tile{tile}/t{threads}", **dict(base, format="f32"), attn_tile=tile, n_threads=threads,
                       n_seq=1, avg_ts=ts * threads)
    for placement, ts in (("first-touch", 50.0), ("interleave", 55.0)):
        add_result(db, bench, f"pp64/{placement}", test="pp", model_type="llama 9M f32", model_n_params=9_000_000, n_prompt=64, n_gen=0,
                   format="f32", n_threads=2, n_seq=1, placement=placement, avg_ts=ts)
    # Decode at depth (bench -d): F32 and F16 caches, slower the deeper the context.
    for kv_type, rate in (("f32", 90.0), ("f16", 95.0)):
        for depth in (0, 512, 2048):
            add_result(db, bench, f"tg16@d{depth}/{kv_type}", **dict(base, format="f32"), kv_type=kv_type, n_depth=depth, n_threads=2,
                       n_seq=1, avg_ts=rate / (1 + depth / 1024))
    add_result(db, bench, "multiproc/p4/t1", test="multiproc", format="f32", processes=4,
               metrics={"model_saved_fraction": saved_fraction, "saved_fraction": saved_fraction - 0.05,
                        "model_sum_rss_bytes": 4 << 30, "model_sum_pss_bytes": int((1 - saved_fraction) * (4 << 30))})
    if kernels:
        run = add_run(db, "vm", "kernels", "abc1234", "bench_kernels --benchmark_format=json")
        add_result(db, run, "kernel/memory_read/2/real_time", test="kernel", samples_ns=[1e6, 1.1e6, 1.05e6],
                   metrics={"bytes_per_second": 40e9})
        add_result(db, run, "kernel/peak/0/2/2/real_time", test="kernel", metrics={"FLOP/s": 300e9})
    seed = add_run(db, "e5", "bench", "def5678", "cpullm bench --workload seed --db r.db")
    # The seed workload on the box: 61 tokens/s counting prompts (avg_ts), 12.2 generated (gen_ts).
    add_result(db, seed, "pp512+tg128/np32", test="pg", model_type="llama 7B q8_0", model_n_params=LLAMA_7B_PARAMS, format="q8_0",
               kv_type="f16", n_threads=40, n_seq=32, n_prompt=512, n_gen=128, avg_ts=61.0, gen_ts=12.2, prompt_ts=400.0,
               ttft_ms=41000.0, tpot_ms=520.0, avg_ns=32 * 640 / 61.0 * 1e9, energy_j=32 * 640 * 9.0,
               metrics={"energy_j_per_generated_token": 45.0})
    return db


def build_database(cpullm, path, int8_speedup, **options):
    """build_runs' runs in a new database at `path`."""
    build_runs(int8_speedup, **options).write(cpullm, path)


def run_report(ctx, *arguments):
    return subprocess.run([ctx.cpullm, "report", *arguments], capture_output=True, text=True, timeout=300)


def read(path):
    with open(path) as f:
        return f.read()


def claim_row(html_text, claim):
    return re.search(rf"<tr><td>{claim}:.*?</tr>", html_text, re.S).group(0)


def verdict_of(html_text, claim):
    return re.search(r'<span class="\w+">([^<]+)</span>', claim_row(html_text, claim)).group(1)


def rendered(ctx, db, name):
    """The page `cpullm report --db DB` writes to the work directory's NAME, as text."""
    out = os.path.join(ctx.workdir, name)
    result = run_report(ctx, "--db", db, "-o", out)
    assert result.returncode == 0, result.stderr
    return read(out)


def test_report_renders_in_chromium(ctx):
    db = os.path.join(ctx.workdir, "report.db")
    build_database(ctx.cpullm, db, int8_speedup=3.4)
    gpu_results = os.path.join(ctx.workdir, "gpu.json")
    with open(gpu_results, "w") as f:
        json.dump({"schema": "cpullm-gpu-results/1", "results": [GPU_RESULT]}, f)
    out = os.path.join(ctx.workdir, "report.html")
    result = run_report(ctx, "--db", db, "--gpu-results", gpu_results, "-o", out)
    assert result.returncode == 0, result.stderr
    text = read(out)
    assert re.search(r"vLLM 0\.4.*1,234.*measured", text), "the imported GPU result is in the throughput table"
    for section in ("latency", "throughput", "roofline", "sweeps", "tco", "gpu", "claims", "runs"):
        assert f'<section id="{section}">' in text
    assert not re.search(r'(src|href)="https?:', text), "the report must be self-contained"
    assert "cpullm bench --workload seed --db r.db" in text, "the runs' command lines are shown"
    # Every figure names its source: a run (host, commit, command) or a model.
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", text, re.S)
    assert all("Source: measured, run" in c or "Source: predicted" in c or "Source: computed" in c for c in captions), captions

    screenshot = os.path.join(ctx.workdir, "report.png")
    errors, figures, layout = browser.render(out, screenshot)
    assert errors == [], "console errors while loading the report"
    assert layout["scroll_width"] <= layout["viewport"], layout
    # At a phone's width: the page body never scrolls sideways (wide tables scroll in their own
    # box) and every figure lies within the viewport, drawn.
    phone_shot = os.path.join(ctx.workdir, "report-phone.png")
    phone_errors, phone_figures, phone = browser.render(out, phone_shot, width=390)
    assert phone_errors == [] and phone["viewport"] == 390 and phone["scroll_width"] <= 390, phone
    assert len(phone_figures) == len(figures)
    for f in phone_figures:
        assert f["left"] >= 0 and f["right"] <= 390 and f["width"] > 200 and f["height"] > 50 and f["shapes"] > 20, f
    titles = [f["title"] for f in figures]
    for expected in ("Time to first token and time per output token", "Distribution over repetitions",
                     "Throughput against threads", "Throughput against concurrent sequences", "Throughput against weight format",
                     "Throughput against NUMA weight placement",
                     "Throughput against context depth (positions filled before the test)", "This host's roofline with measured regions",
                     "Predicted roofline of profile e5-4627v4", "tokens/s by attn_tile and n_threads", "tokens/s by format and n_seq",
                     "Cost per million generated tokens against daily volume"):
        assert expected in titles
    for f in figures:
        assert f["width"] > 100, f
        assert f["height"] > 100, f
        assert f["shapes"] > 20, f
    assert os.path.getsize(screenshot) > 50_000

    # Verdicts come from the rows: INT8 3.4x (C6 holds), multiproc saving 71% (C11 holds), the
    # seed box's 61 tokens/s against the claimed 85 (C13 refuted); the rest as no data says.
    assert verdict_of(text, "C6") == "holds"
    assert verdict_of(text, "C11") == "holds"
    assert "4 processes sharing the mapped model saved 71%" in claim_row(text, "C11"), "C11 uses the measured figure"
    assert re.search(r"f32 \u00b7 multiproc</td>.*?71\.0%", text), "the sharing result is in the throughput section"

    # The roofline: every region with FLOPs of every profiled point on the host, against the
    # kernel benchmarks' roofs (stored in the database, preferred over bench's own).
    contents = Database(db).load()
    points, no_flops = roofs.region_points(contents)
    assert len(points) == 8 * 3
    assert {name for name, _ in no_flops} == {"embedding"}
    assert "Without FLOPs, so not on a FLOP/s axis: embedding" in text
    assert len(re.findall(r"<tr><td>(q_proj|attention|lm_head)</td>", text)) == 24, "one table row per region point"
    assert "Roofs: roofs stored by scripts/nightly&#39;s kernel benchmarks" in text
    # The E5 box's measured energy of the seed workload sets its load power in the TCO.
    assert re.search(r"measured: 45 J per generated token, \d+ W package \+ DRAM \(RAPL\) in run 3 on e5box", text)
    assert "no measured energy of the workload" in text, "the 8380 option's power comes from its profile"
    assert verdict_of(text, "C13") == "refuted"
    assert verdict_of(text, "C9") == "not measured yet"
    assert verdict_of(text, "C1") == "refuted"

def test_verdict_follows_the_data(ctx):
    db = os.path.join(ctx.workdir, "report-slow-int8.db")
    build_database(ctx.cpullm, db, int8_speedup=1.5)
    out = os.path.join(ctx.workdir, "report-slow-int8.html")
    result = run_report(ctx, "--db", db, "--runs", "1", "-o", out)
    assert result.returncode == 0, result.stderr
    text = read(out)
    assert verdict_of(text, "C6") == "does not hold"
    assert re.search(r"measured tokens/s factor 1\.50x, 95% interval 1\.4\d-1\.5\d", text)
    assert verdict_of(text, "C13") == "not testable here", "--runs 1 leaves out the seed box's run"

def test_roofs_from_bench_and_sharing_below_the_claim(ctx):
    """Without kernel benchmarks the roofline uses the roofs cpullm bench measured with its
    regions; 4 processes saving 20% of the model's memory refute C11."""
    db = os.path.join(ctx.workdir, "report-bench-roofs.db")
    build_database(ctx.cpullm, db, 3.0, saved_fraction=0.2, kernels=False)
    text = rendered(ctx, db, "report-bench-roofs.html")
    assert 'data-title="This host&#39;s roofline with measured regions"' in text
    assert "Roofs: roofs measured by cpullm bench next to its regions" in text
    assert roofs.host_roofs(Database(db).load(), "f-vm")[:2] == (30e9, 200e9)
    assert verdict_of(text, "C11") == "does not hold"
    assert "saved 20%" in claim_row(text, "C11")


def test_stored_text_is_escaped(ctx):
    """Text from the database (a command line, a case name) reaches the page as text: markup in
    it is escaped wherever it is shown, never interpreted."""
    db = os.path.join(ctx.workdir, "report-markup.db")
    runs = build_runs(3.0)
    run = add_run(runs, "vm", "bench", "abc1234", "cpullm bench -m '<img src=x onerror=alert(1)>.gguf'")
    add_result(runs, run, "tg16/<b>bold</b>", test="tg", model_type="llama 9M f32", model_n_params=9_000_000, n_prompt=0,
               n_gen=16, format="f32<b>bold</b>", n_threads=1, n_seq=1, avg_ts=10.0, ttft_ms=5.0, tpot_ms=100.0)
    runs.write(ctx.cpullm, db)
    text = rendered(ctx, db, "report-markup.html")
    assert "<img src=x" not in text
    assert "<b>bold</b>" not in text
    assert "cpullm bench -m &#39;&lt;img src=x onerror=alert(1)&gt;.gguf&#39;" in text
    assert "<td>f32&lt;b&gt;bold&lt;/b&gt; \u00b7 tg16 \u00b7 1 thread (run 4)</td>" in text

def test_bad_gpu_results(ctx):
    path = os.path.join(ctx.workdir, "gpu-bad.json")
    with open(path, "w") as f:
        json.dump({"schema": "cpullm-gpu-results/1", "results": [dict(GPU_RESULT, gpu="v100")]}, f)
    result = run_report(ctx, "--gpu-results", path, "-o", os.path.join(ctx.workdir, "never.html"))
    assert result.returncode == 1
    assert "gpu-bad.json: results[0]: gpu 'v100' is not one of" in result.stderr

def test_bad_input(ctx):
    out = os.path.join(ctx.workdir, "never.html")
    for arguments, message in ((["--db", "/nonexistent.db"], "/nonexistent.db: no such database file"),
                               (["--assumptions", "/nonexistent.json"], "/nonexistent.json: cannot read"),
                               (["--profile", "nosuch"], "--profile nosuch: no tuning/profiles/nosuch.json"),
                               (["--runs", "abc"], "argument --runs: invalid int value: 'abc'")):
        result = run_report(ctx, *arguments, "-o", out)
        assert result.returncode == 1, arguments
        assert message in result.stderr
        assert result.stderr.count("\n") == 1, result.stderr
    db = os.path.join(ctx.workdir, "report.db")
    build_database(ctx.cpullm, db, 3.0)
    result = run_report(ctx, "--db", db, "--runs", "99", "-o", out)
    assert result.returncode == 1
    assert "no run with id 99" in result.stderr


def test_wrong_types_and_newer_schema_are_refused(ctx):
    out = os.path.join(ctx.workdir, "never.html")
    for table, column, value in (("results", "avg_ts", "fast"), ("samples", "ns", "slow"), ("runs", "cores", "many"),
                                 ("results", "case_name", b"\x00bytes")):
        db = os.path.join(ctx.workdir, f"wrong-{table}-{column}.db")
        build_database(ctx.cpullm, db, 3.0)
        # A value no cpullm writes: another program's edit, made behind cpullm's back.
        with sqlite3.connect(db) as c:
            c.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = (SELECT MIN(rowid) FROM {table})", (value,))
        result = run_report(ctx, "--db", db, "-o", out)
        assert result.returncode == 1, result.stderr
        assert re.search(rf"^cpullm: error: {re.escape(db)}: table {table}, column {column}, .* is not ", result.stderr)
        assert result.stderr.count("\n") == 1, result.stderr
    db = os.path.join(ctx.workdir, "newer.db")
    build_database(ctx.cpullm, db, 3.0)
    with sqlite3.connect(db) as c:
        c.execute("INSERT INTO schema_version (version) VALUES (999)")
    result = run_report(ctx, "--db", db, "-o", out)
    assert result.returncode == 1
    assert f"cpullm: error: {db}: schema version 999 is newer than this cpullm knows" in result.stderr
    assert not os.path.exists(out)


def test_password_never_shown(ctx):
    out = os.path.join(ctx.workdir, "never.html")
    for location in ("postgresql://cpullm:s3cret@127.0.0.1:1/results", "host=127.0.0.1 port=1 password=s3cret",
                     "host=127.0.0.1 password=s3 cret"):  # the last one malformed: libpq would quote "cret"
        result = run_report(ctx, "--db", location, "-o", out)
        assert result.returncode == 1, result.stderr
        assert result.stderr.startswith("cpullm: error: "), result.stderr
        assert "s3" not in result.stderr
        assert "cret" not in result.stderr
        assert result.stderr.count("\n") == 1, result.stderr
