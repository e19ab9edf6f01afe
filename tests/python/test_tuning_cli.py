"""End-to-end checks of `cpullm tune` and `cpullm sweep` through the cpullm binary.

- `tune --hardware e5-4627v4` on this machine takes the "other box" path: it says so on its first
  line, prints the plan, the kernel command line and sysctl settings, and predictions labelled
  as such, for a LLaMA-7B-shaped Q8_0 file of 7 GB that is a sparse file here (header only: it is
  planned for, never loaded);
- the new profiles are read, and a malformed profile is an error naming the field;
- a tiny real sweep over stories260K (threads x format), its table and TOML configs, the config
  read back by `cpullm bench --config`, and `--resume` of the finished sweep adding nothing;
- a sweep killed after its second point and resumed: one `sweep` run in the results database,
  every evaluation a row exactly once with its repetitions as samples, the run finished, and
  `cpullm db` reading it; resumed once more, finished, it says so and adds nothing;
- a PostgreSQL --db's password (URL or conninfo) in no note, error, state file or table.
"""
import json
import os
import shutil
import signal
import sqlite3
import struct
import subprocess
import time

import pytest

import tuning
from cli_checks import expect_error, run, write_tiny_model
from tuning import measure, tune

PROFILES = os.path.join(os.path.dirname(os.path.abspath(tuning.__file__)), "profiles")


def gguf_string(text):
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_sparse_llama_q8_0(path, dim=4096, ffn=11008, layers=32, heads=32):
    """A GGUF file with a LLaMA header (default LLaMA-7B's; Q8_0 matrices, F32 norms) whose tensor
    data (7 GB for LLaMA-7B) is a hole: the header is all `info`, `topo -m` and `tune` read."""
    vocab = 32000
    q8 = lambda rows, cols: (8, rows * cols // 32 * 34)  # noqa: E731  (type Q8_0, bytes)
    tensors = [("token_embd.weight", [dim, vocab], *q8(vocab, dim))]
    for b in range(layers):
        tensors += [(f"blk.{b}.attn_norm.weight", [dim], 0, dim * 4)]
        tensors += [(f"blk.{b}.attn_{n}.weight", [dim, dim], *q8(dim, dim)) for n in ("q", "k", "v", "output")]
        tensors += [(f"blk.{b}.ffn_norm.weight", [dim], 0, dim * 4),
                    (f"blk.{b}.ffn_gate.weight", [dim, ffn], *q8(ffn, dim)),
                    (f"blk.{b}.ffn_up.weight", [dim, ffn], *q8(ffn, dim)),
                    (f"blk.{b}.ffn_down.weight", [ffn, dim], *q8(dim, ffn))]
    tensors += [("output_norm.weight", [dim], 0, dim * 4), ("output.weight", [dim, vocab], *q8(vocab, dim))]
    u32 = {"llama.block_count": layers, "llama.embedding_length": dim, "llama.feed_forward_length": ffn,
           "llama.attention.head_count": heads, "llama.attention.head_count_kv": heads,
           "llama.context_length": 4096, "llama.rope.dimension_count": dim // heads, "llama.vocab_size": vocab}
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(u32) + 2)
    header += gguf_string("general.architecture") + struct.pack("<I", 8) + gguf_string("llama")
    header += gguf_string("llama.attention.layer_norm_rms_epsilon") + struct.pack("<If", 6, 1e-5)  # type F32
    for key, value in u32.items():
        header += gguf_string(key) + struct.pack("<II", 4, value)
    offset = 0
    for name, shape, kind, size in tensors:
        header += gguf_string(name) + struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}Q", *shape)
        header += struct.pack("<IQ", kind, offset)
        offset += size
    header += b"\0" * (-len(header) % 32)
    with open(path, "wb") as f:
        f.write(header)
        f.truncate(len(header) + offset)  # a hole: no disk blocks, no page cache
    return len(header) + offset


def test_tune_other_box_plans_and_predicts(ctx):
    model = os.path.join(ctx.workdir, "llama7b-q8_0-sparse.gguf")
    size = write_sparse_llama_q8_0(model)
    assert size > 7e9
    out = run([ctx.cpullm, "tune", "--hardware", "e5-4627v4", "-m", model]).stdout
    lines = out.splitlines()
    assert lines[0] == ("cpullm tune: e5-4627v4 is not this machine: planning only (emulated topology; nothing below "
                        "is measured or applied)"), lines[0]
    for fragment in ["4 package(s), 4 NUMA node(s), 40 cores", "40 threads, bind numa, per node [10, 10, 10, 10]",
                     "placement shard", "isolcpus=1-9,11-19,21-29,31-39 nohz_full=1-9,11-19,21-29,31-39 "
                     "rcu_nocbs=1-9,11-19,21-29,31-39 transparent_hugepage=always",
                     "vm.swappiness = 1", "kernel.numa_balancing = 0",
                     "PREDICTIONS (roofline model, not measurements)", "memory_bandwidth_gbs_per_package = 76.8",
                     "bandwidth efficiency = 0.75", "model: 32 layers, dim 4096",
                     "decode tok/s shard | decode tok/s replicate | decode tok/s interleave | decode tok/s first-touch"]:
        assert fragment in out, f"{fragment!r} not in:\n{out}"
    q8 = next(l for l in lines if l.startswith("| q8_0 |") and "| 1 |" in l)
    # LLaMA-7B Q8_0 on 4 sockets, all reads local: 4 x 76.8 GB/s x 0.75 over ~7.1 GB per token.
    shard = float(q8.split("|")[4].split()[0])
    assert 28 < shard < 34, q8
    # First-touch (every page on one node, 3/4 of the reads over that node's 32 GB/s of links) is
    # link-bound: 32 / 0.75 GB/s over the same bytes, about a fifth of shard.
    first_touch = q8.split("|")[7]
    assert "cross-socket link" in first_touch and abs(float(first_touch.split()[0]) / shard - 32 / 0.75 / 230.4) < 0.03, q8
    # Nothing was read: the sparse file is still a hole.
    assert os.stat(model).st_blocks * 512 < 1 << 20


def test_tune_plans_a_model_too_large_for_this_machine(ctx):
    # LLaMA-65B's shape in Q8_0: ~69 GB, more than this machine's memory, a hole on its disk.
    model = os.path.join(ctx.workdir, "llama65b-q8_0-sparse.gguf")
    size = write_sparse_llama_q8_0(model, dim=8192, ffn=22016, layers=80, heads=64)
    with open("/proc/meminfo") as f:
        memory = int(f.readline().split()[1]) * 1024
    if size < memory:
        pytest.skip(f"this machine's {memory >> 30} GiB of memory holds the {size >> 30} GiB model")
    # Another box (4 x 64 GiB): planned for, predictions labelled.
    out = run([ctx.cpullm, "tune", "--hardware", "e5-4627v4", "-m", model]).stdout
    assert "planning only" in out.splitlines()[0] and "PREDICTIONS (roofline model, not measurements)" in out, out
    assert "model: 80 layers, dim 8192" in out and "| q8_0 |" in out, out
    # This box: kernel rates measured and predictions made, but the model is not run.
    space = os.path.join(ctx.workdir, "large.toml")
    with open(space, "w") as f:
        f.write('[values]\nthreads = [1]\nformat = ["q8_0"]\n[workload]\nprompt = 64\ngen = 32\n')
    out = run([ctx.cpullm, "tune", "--hardware", "host", "-m", model, "--space", space,
               "--out", os.path.join(ctx.workdir, "tune-large")], timeout=600).stdout
    assert "does not fit this machine's" in out and "planning only" in out, out
    assert "layers 4096x11008x4096" in out and "q8_0 (1024 MiB): 1: " in out, out  # decode steps and the 64-token chunk
    assert ", 64: " in out and "threads=1 format=q8_0: decode " in out, out
    assert "sweep (budget" not in out, out
    assert os.stat(model).st_blocks * 512 < 1 << 20  # nothing was read


def test_tune_this_box_sweeps_a_model_that_fits(ctx):
    """`tune --hardware host` on a model that fits runs its sweep, re-measuring the kernel rates
    before each run (what scripts/run-default does), and writes its best configurations."""
    model = os.path.join(ctx.workdir, "tune-host-tiny.gguf")
    write_tiny_model(ctx.cpullm, model)
    space = os.path.join(ctx.workdir, "tune-host.toml")
    with open(space, "w") as f:
        f.write('[values]\nthreads = [1]\nformat = ["f32", "q8_0"]\n[workload]\nprompt = 16\ngen = 8\n')
    out_dir = os.path.join(ctx.workdir, "tune-host")
    out = run([ctx.cpullm, "tune", "--hardware", "host", "-m", model, "--space", space, "--budget", "60s",
               "--out", out_dir], timeout=600).stdout
    assert "sweep (budget" in out and "predicted" in out.lower(), out
    assert any(name.startswith("best-") and name.endswith(".toml") for name in os.listdir(out_dir)), os.listdir(out_dir)


def test_page_check_reads_the_model_files_pages(ctx):
    # tune's check of the model's own pages against fresh memory: bench_kernels' memory_read_file
    # over the file's mapping, interleaved with memory_read. A file that cannot be mapped is an
    # error naming it.
    model = os.path.join(ctx.shared, "stories260K.gguf")
    if not os.path.exists(model):
        pytest.skip(f"{model} is absent")
    check = tune.page_check(ctx.cpullm, model, [1])
    windows = check[1]
    assert len(windows["file"]) == tune.PAGE_CHECK_WINDOWS == len(windows["fresh"]), check
    assert all(v > 0.1 for v in windows["file"] + windows["fresh"]), check
    missing = os.path.join(ctx.workdir, "no-such-model.gguf")
    try:
        tune.page_check(ctx.cpullm, missing, [1])
    except measure.MeasureError as e:
        assert missing in str(e) and "--read_file" in str(e), e
    else:
        raise AssertionError("page_check of a missing file did not fail")


def test_new_profiles_read(ctx):
    for name, packages, cores in [("xeon-8380", 2, 80), ("epyc-9355p", 1, 32), ("xeon-6980p", 2, 256)]:
        data = json.loads(run([ctx.cpullm, "topo", "--hardware", name, "--json"]).stdout)
        assert data["topology"]["packages"] == packages and len(data["topology"]["cores"]) == cores, name
        assert data["profile"]["memory_bandwidth_gbs_per_package"]["source"], name


def test_malformed_profile_names_the_field(ctx):
    with open(os.path.join(PROFILES, "xeon-8380.json")) as f:
        good = json.load(f)
    path = os.path.join(ctx.workdir, "broken.json")
    for change, fragment in [(lambda p: p.pop("socket_link_gbs_per_package"), 'field "socket_link_gbs_per_package" is missing'),
                             (lambda p: p["idle_watts_per_package"].update(value="low"), 'field "idle_watts_per_package": "value" must be a number'),
                             (lambda p: p["recommendations"][1].update(setting="swapiness"), 'field "recommendations[1]": unknown setting "swapiness"'),
                             (lambda p: p["recommendations"][2].pop("why"), 'field "recommendations[2]" has no "why" string'),
                             (lambda p: p["caches"].pop("source"), 'field "caches" has no "source"')]:
        broken = json.loads(json.dumps(good))
        change(broken)
        with open(path, "w") as f:
            json.dump(broken, f)
        expect_error([ctx.cpullm, "topo", "--hardware", path], path, fragment)
    # tune reads the profile through the same reader: the last one's error, through tune.
    expect_error([ctx.cpullm, "tune", "--hardware", path, "-m", os.path.join(ctx.workdir, "llama7b-q8_0-sparse.gguf")],
                 'field "caches" has no "source"')


def test_tiny_sweep_end_to_end(ctx):
    model = os.path.join(ctx.shared, "stories260K.gguf")
    if not os.path.exists(model):
        pytest.skip(f"{model} is absent")
    space = os.path.join(ctx.workdir, "tiny.toml")
    with open(space, "w") as f:
        f.write('[values]\nthreads = [1, 2]\nformat = ["f32", "q8_0"]\n[workload]\nprompt = 16\ngen = 16\n')
    out_dir = os.path.join(ctx.workdir, "sweep")
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [ctx.cpullm, "sweep", "-m", model, "--space", space, "--strategy", "grid", "--budget", "5m", "--out", out_dir,
           "--point-budget", "3", "--max-reps", "2", "--confirm-reps", "2", "--db", os.path.join(ctx.workdir, "sweep.sqlite")]
    proc = run(cmd, timeout=600)
    assert proc.stderr.count(" measured, ") == 4, proc.stderr
    assert "best for throughput:" in proc.stdout and "runner-up" in proc.stdout, proc.stdout
    table = open(os.path.join(out_dir, "sweep-table.md")).read()
    assert table.count("| 0 | threads=") == 4 and table.count("| confirm |") == 2, table
    config = os.path.join(out_dir, "best-throughput.toml")
    text = open(config).read()
    assert "\nthreads = " in text and "\nmodel = " in text, text
    bench = run([ctx.cpullm, "bench", "--config", config, "-p", "0", "-n", "4", "-r", "1", "-o", "jsonl"]).stdout
    row = json.loads(bench.splitlines()[-1])
    threads = int(text.split("\nthreads = ")[1].split()[0])
    assert row["n_threads"] == threads, (row, text)
    # generate reads the same file (options it lacks would be ignored).
    generated = run([ctx.cpullm, "generate", "--config", config, "-p", "Once", "-n", "4", "--temp", "0"])
    assert f"{threads} threads" in generated.stderr, generated.stderr
    state = os.path.join(out_dir, "sweep-state.jsonl")
    before = open(state).read()
    again = run(cmd + ["--resume"], timeout=600)  # a finished sweep: nothing to repeat, nothing to add
    assert " measured, " not in again.stderr and " resumed, " not in again.stderr, again.stderr
    assert "the sweep finished at" in again.stderr and "--resume adds nothing" in again.stderr, again.stderr
    assert open(state).read() == before
    expect_error(cmd, "--resume")  # the same folder without --resume is refused


def fresh_sweep(ctx, name, space_text):
    """stories260K (skipping without it), a space file holding space_text, and an empty output
    folder and results database named after `name`: (model, space, out_dir, db)."""
    model = os.path.join(ctx.shared, "stories260K.gguf")
    if not os.path.exists(model):
        pytest.skip(f"{model} is absent")
    space = os.path.join(ctx.workdir, f"{name}.toml")
    with open(space, "w") as f:
        f.write(space_text)
    out_dir, db = os.path.join(ctx.workdir, f"sweep-{name}"), os.path.join(ctx.workdir, f"sweep-{name}.sqlite")
    shutil.rmtree(out_dir, ignore_errors=True)
    for path in (db, db + "-wal", db + "-shm"):
        if os.path.exists(path):
            os.remove(path)
    return model, space, out_dir, db


def test_sweep_at_depth_measures_and_records_it(ctx):
    # [workload] depth: every measurement after that many filled positions (bench -d), its rows
    # in the results database with n_depth, the config's comment naming it; generate, which
    # cannot fill the context, is refused as a backend for it.
    model, space, out_dir, db = fresh_sweep(ctx, "depth", '[values]\nthreads = [1]\n[workload]\nprompt = 8\ngen = 4\ndepth = 200\n')
    cmd = [ctx.cpullm, "sweep", "-m", model, "--space", space, "--strategy", "grid", "--budget", "2m", "--out", out_dir,
           "--point-budget", "2", "--max-reps", "2", "--confirm-reps", "2"]
    run(cmd + ["--db", db], timeout=300)
    with sqlite3.connect(db) as con:
        depths = con.execute("SELECT case_name, n_depth FROM results").fetchall()
    assert depths and all(depth == 200 for _, depth in depths), depths
    assert any(name.startswith("sweep/") for name, _ in depths), depths
    assert "depth 200" in open(os.path.join(out_dir, "best-throughput.toml")).read()
    shutil.rmtree(out_dir, ignore_errors=True)
    expect_error(cmd + ["--backend", "generate"], "needs `cpullm bench -d`")


def test_sweep_rows_in_results_db_survive_interruption(ctx):
    model, space, out_dir, db = fresh_sweep(ctx, "db", '[values]\nthreads = [1, 2]\nformat = ["f32", "q8_0"]\n'
                                                       '[workload]\nprompt = 16\ngen = 8\n')
    cmd = [ctx.cpullm, "sweep", "-m", model, "--space", space, "--strategy", "grid", "--budget", "5m", "--out", out_dir,
           "--point-budget", "3", "--max-reps", "2", "--confirm-reps", "2", "--db", db]
    # Killed (SIGKILL: no clean-up) once two evaluations are stored.
    state = os.path.join(out_dir, "sweep-state.jsonl")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not (os.path.exists(state) and sum(1 for _ in open(state)) >= 2):
        assert proc.poll() is None and time.monotonic() < deadline, "the sweep ended before its second point"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with sqlite3.connect(db) as c:
        runs = c.execute("SELECT id, kind, finished_at FROM runs").fetchall()
        assert len(runs) == 1 and runs[0][1] == "sweep" and runs[0][2] is None, runs  # unfinished
        done = c.execute("SELECT count(*) FROM results").fetchone()[0]
    assert 1 <= done < 4, done  # the second may be in the state file, not yet in the database
    resumed = run(cmd + ["--resume"], timeout=600)
    assert resumed.stderr.count(" resumed, ") >= 2 and resumed.stderr.count(" measured, ") >= 1, resumed.stderr
    with sqlite3.connect(db) as c:
        runs = c.execute("SELECT id, kind, command, finished_at FROM runs").fetchall()
        # One run, the interrupted one, continued and now finished; bench's own runs are elsewhere.
        assert len(runs) == 1 and runs[0][1] == "sweep" and runs[0][3] is not None, runs
        assert "--resume" not in runs[0][2] and runs[0][2].startswith("cpullm sweep -m "), runs
        rows = c.execute("SELECT id, case_name, test, format, n_threads, avg_ts, ttft_ms FROM results").fetchall()
        # The model's columns as bench recorded them: stories260K has 292,800 parameters.
        models = c.execute("SELECT DISTINCT model_n_params, isa FROM results").fetchall()
        assert len(models) == 1 and models[0][0] == 292800 and models[0][1] in ("avx2", "avx512"), models
        cases = [r[1] for r in rows]
        assert len(cases) == len(set(cases)) == 6, cases  # 4 points at level 0, then winner and runner-up
        assert sum(case.startswith("sweep/0/") for case in cases) == 4 and sum("/confirm/" in c for c in cases) == 2, cases
        assert {(r[3], r[4]) for r in rows if r[1].startswith("sweep/0/")} == {(f, t) for f in ("f32", "q8_0") for t in (1, 2)}
        assert all(r[2] == "pg" and r[5] > 0 and r[6] > 0 for r in rows), rows
        # Every repetition is a sample, and the row's tokens/s is their mean.
        for result_id, *_, avg_ts, _ in rows:
            ts = [t for (t,) in c.execute("SELECT ts FROM samples WHERE result_id = ?", (result_id,))]
            assert len(ts) >= 1 and abs(sum(ts) / len(ts) - avg_ts) < 1e-9 * avg_ts, (result_id, ts, avg_ts)
    assert os.path.exists(os.path.join(out_dir, "bench-runs.db"))
    # Resuming the finished sweep says so and copies nothing into a new run.
    finished = run(cmd + ["--resume"], timeout=600)
    assert "the sweep finished at" in finished.stderr and " resumed, " not in finished.stderr, finished.stderr
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
        assert c.execute("SELECT count(*) FROM results").fetchone()[0] == 6
    # cpullm reads what the sweep wrote.
    listed = run([ctx.cpullm, "db", "--db", db, "results", str(runs[0][0]), "--export-json"]).stdout
    assert json.loads(listed)["run"]["kind"] == "sweep" and len(json.loads(listed)["results"]) == 6, listed


def test_sweep_never_shows_a_database_password(ctx):
    """A PostgreSQL --db with a password (no server there: every point fails): the note, the
    failures on stderr, sweep-state.jsonl and sweep-table.md hold no password, and a conninfo
    string is no SQLite file."""
    model = os.path.join(ctx.workdir, "tiny-secret.gguf")
    write_tiny_model(ctx.cpullm, model)
    space = os.path.join(ctx.workdir, "one.toml")
    with open(space, "w") as f:
        f.write('[values]\nthreads = [1]\n[workload]\nprompt = 4\ngen = 2\n')
    for name, location in (("url", "postgresql://cpullm:s3cret-pw@127.0.0.1:1/results"),
                           ("conninfo", "host=127.0.0.1 port=1 dbname=results password=s3cret-pw")):
        out_dir = os.path.join(ctx.workdir, f"sweep-secret-{name}")
        shutil.rmtree(out_dir, ignore_errors=True)
        proc = run([ctx.cpullm, "sweep", "-m", model, "--space", space, "--strategy", "grid", "--budget", "2m",
                    "--out", out_dir, "--point-budget", "2", "--max-reps", "1", "--db", location], expect_ok=False)
        assert "cannot connect to PostgreSQL" in proc.stderr + proc.stdout, proc.stderr
        assert "note:" in proc.stderr and "***" in proc.stderr, proc.stderr
        files = sorted(os.listdir(out_dir))
        assert "sweep-state.jsonl" in files and "sweep-table.md" in files, files
        for text in [proc.stdout, proc.stderr, " ".join(files)] + [open(os.path.join(out_dir, f)).read() for f in
                                                                   ("sweep-state.jsonl", "sweep-table.md")]:
            assert "s3cret" not in text, text
        assert not [f for f in os.listdir(".") if "s3cret" in f]

