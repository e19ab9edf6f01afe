#!/usr/bin/python3
"""Decode speed against this machine's memory roof, measured in the same run.

Decoding one token reads every weight matrix once (and one embedding row), so
tokens/s x weight bytes per token is the bandwidth decode achieves; the issue's target is
at least 85% of the read bandwidth measured with the same thread count right before the run: the
faster of bench_kernels' memory_read (memory in whatever pages the system gives) and
memory_read_huge (2 MiB pages), as either may be the machine's best. For each model: generate (or
reuse) a synthetic model at a real shape, quantize it, run `cpullm bench -p 0 -n TOKENS
--prefetch 1 -r 1` (a warm-up token, then TOKENS decode steps timed; tokens/s is the steps after
the first token's, as `cpullm generate` counts them), and print one line per run. `--prefetch`
maps the embedding table after the first pass: each generated token reads one row of it, nearly
always one no token read before, and a run of a few dozen tokens would otherwise time a page
fault a token that a long-running server, whose table is mapped by then, does not pay (tens to
hundreds of microseconds a token; docs/kernels-decode.md, "The embedding table's page faults").

Every run of this build is stored in the results database (--db, default results/results.db)
by `cpullm bench --db --suite decode_bandwidth`, with the roof read before it and the weight bytes
a token reads: `cpullm report` shows each run's share of the roof and this script's command line
that reproduces it (docs/bench.md, "--suite").

The same bench run also measures the roof inside the process, step by step (`--roof-pairs`,
docs/bench.md): after its timed repetition, one more decode whose every step is followed by a
read of anonymous memory as large as the step's weights, on the same threads. "paired" is the
decode's weight bandwidth over that read's, over all pairs; "p50" the median of the pairs' own
ratios. A host whose bandwidth changes within seconds moves both sides of a pair alike.

"cache GB/s" is the case's kernel with its matrix in cache (bench_kernels matvec/TYPE/ROWS/COLS/ISA,
the same threads), read right after the first roof: how fast the kernel computes. Where it is
not well above the roof, the kernel, not memory, sets the decode speed (bench_kernels
memory_read_work and cache_read_work measure how much of the roof a loop with a given headroom
reads); the summary ends with every run's paired share grouped by that headroom.

On a shared host the roof and the decode speed both move from one second to the next, so the
roof is read right before and right after each case's runs: a run is held against the read
before it (the one stored with it), and the read after says whether the host held steady (the
two within 10%). `--repeat N` runs every case N times and ends with each case's median and
range, over all runs and over the steady ones alone, and `--baseline DIR` runs a second build's
cpullm next to this one's (not stored), against the same roofs, the two taking turns going
first, and reports the speed ratio of the two per repetition: the comparison that holds when
absolute figures do not.

How a model's pages sit in the page cache changes what a decode reads per second: on some
hosts, pages resident for hours stall for 10-200 ms at a time, now and then (docs/tuning.md,
"Page-cache stalls"; bench_kernels memory_read_file measures it), and a file cached in 4 KiB
pages can read slower than one cached in 2 MiB folios (docs/kernels-decode.md, "Page sizes"). `--fresh-copies` gives every run its own
copy of the model, written back to disk and dropped from the page cache just before the run
(deleted after it): the engine then reads it from disk as a server does when it starts, through
its mapping's huge-page advice, and no writeback of a copy runs beside a decode. The "2M pages"
column is the share of the model the run had mapped in 2 MiB pages (cpullm bench says it).

Usage: suites/decode_bandwidth.py [--build build] [--models DIR] [--threads 2] [--tokens 64]
       [--isa avx2,avx512] [--cases tinyllama:q8_0,tinyllama:q4_0,llama7b-4l:q8_0,llama7b-4l:q4_0]
       (shapes: tinyllama, llama7b-4l, tiny; formats: q8_0, q4_0, q8_0-r8, q4_0-r8)
       [--repeat 1] [--baseline DIR] [--fresh-copies] [--db results/results.db] [--roof-min-time S]
"""
import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys

SHAPES = {  # name: gen-model flags (F16 sources; quantize derives the rest)
    "tinyllama": ["--shape", "tinyllama-1.1b"],
    "llama7b-4l": ["--shape", "llama-7b", "--layers", "4"],
    # A few MB: runs a suite end to end in seconds (its tests); its figures time the calls, not memory.
    "tiny": ["--shape", "custom", "--layers", "2", "--dim", "256", "--ffn", "768", "--heads", "4", "--vocab", "512"],
}


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, check=True, **kw)


def model_file(args, shape, fmt):
    source = os.path.join(args.models, f"{shape}-f16.gguf")
    if not os.path.exists(source):
        run([args.cpullm, "gen-model", *SHAPES[shape], "--dtype", "f16", "-o", source])
    if fmt == "f16":
        return source
    path = os.path.join(args.models, f"{shape}-{fmt}.gguf")
    if not os.path.exists(path):
        run([args.cpullm, "quantize", source, path, "--type", fmt])
    return path


def weight_bytes_per_token(args, path):
    """Every tensor is read once per token except the embedding table, of which one row (all of it
    where the output projection is the table itself)."""
    tensors = json.loads(run([args.cpullm, "info", path, "--json"]).stdout)["tensors"]
    tied = not any(t["name"] == "output.weight" for t in tensors)
    total = 0
    for t in tensors:
        if t["name"] == "token_embd.weight" and not tied:
            total += t["bytes"] // t["shape"][1]
        else:
            total += t["bytes"]
    return total


def bench_kernels(args, benchmark_filter, **kw):
    """bench_kernels' JSON for the benchmarks matching the filter, each timed for --roof-min-time."""
    command = [os.path.join(args.build, "suites", "kernels", "bench_kernels"), f"--benchmark_filter={benchmark_filter}",
               "--benchmark_format=json"] + ([f"--benchmark_min_time={args.roof_min_time}"] if args.roof_min_time else [])
    return json.loads(run(command, **kw).stdout)["benchmarks"]


def read_bandwidth(args):
    benchmarks = bench_kernels(args, f"^memory_read(_huge)?/{args.threads}/")
    reads = [b["bytes_per_second"] for b in benchmarks if "bytes_per_second" in b]
    if not reads:
        sys.exit(f"bench_kernels measured no read bandwidth: {benchmarks}")
    return max(reads)


def bench_type(args, fmt):
    """bench_kernels' number for a format: its ggml type, from the binary's format registry."""
    formats = json.loads(run([args.cpullm, "info", "--formats", "--json"]).stdout)["formats"]
    return next(f["ggml_type"] for f in formats if f["name"] == fmt)


BENCH_ISAS = {"avx2": 1, "avx512": 2}
CACHE_MATRICES = {"tinyllama": "2048/2048", "llama7b-4l": "4096/4096", "tiny": "256/2048"}  # ROWS/COLS of the cache rate


def cache_rate(args, shape, fmt, isa):
    """Bytes/s of the case's matvec kernel with its matrix in cache: bench_kernels'
    matvec/TYPE/ROWS/COLS/ISA (a dim x dim matrix of 2.4-18 MB, held by the last-level cache, or
    the tiny shape's 256 x 2048 in L2) on the same threads. A kernel that computes no faster than
    memory delivers cannot read at the roof."""
    name = f"matvec/{bench_type(args, fmt)}/{CACHE_MATRICES[shape]}/{BENCH_ISAS[isa]}/"
    benchmarks = bench_kernels(args, f"^{name}", env=dict(os.environ, OMP_NUM_THREADS=str(args.threads)))
    return benchmarks[0]["bytes_per_second"]


def cold_copy(path):
    """A copy of path written back to disk and dropped from the page cache: read from disk next."""
    copy = path + ".fresh-copy"
    shutil.copyfile(path, copy)
    with open(copy, "rb+") as written:  # written back now: not by the flusher ~30 s later, mid-run
        os.fsync(written.fileno())
        os.posix_fadvise(written.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return copy


def decode_speed(args, cpullm, path, isa, stored):
    """tokens/s, the share of the model mapped in 2 MiB pages, and for this build's run (`stored`:
    the roof read before it and the weight bytes a token reads, stored with it in --db) the bench
    run's paired shares of the roof (over all pairs, and their median) and its weight bytes a step."""
    model = cold_copy(path) if args.fresh_copies else path
    this_build = []
    if stored:
        roof, per_token = stored
        this_build = ["--roof-pairs"] + store_flags(args, f"bench_kernels memory_read and memory_read_huge at {args.threads} "
                                                    "threads, the faster, read before the run", roof, "bytes", per_token)
    try:
        proc = run([cpullm, "bench", "-m", model, "-p", "0", "-n", str(args.tokens), "-t", str(args.threads),
                    "--isa", isa, "--prefetch", "1", "-r", "1", "-o", "json"] + this_build)
        size = os.path.getsize(model)
    finally:
        if args.fresh_copies:
            os.remove(model)
    record = json.loads(proc.stdout)[0]
    huge = record.get("model_huge_page_bytes")
    return (1e3 / record["tpot_ms"], f"{100 * huge / size:.0f}%" if huge is not None else "?",
            record.get("paired_roof_share"), record.get("paired_roof_share_p50"), record.get("paired_step_bytes"))


def spread(values, fmt):
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))})"


def suite_arguments(description):
    """The options every suite here takes: where cpullm is built, where its models go, the threads,
    the database its runs go to, how long bench_kernels times each roof."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--models", default="models")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--db", default=os.path.join("results", "results.db"),
                    help="results database the runs are stored in: SQLite file or postgresql:// URL")
    ap.add_argument("--roof-min-time", type=float,
                    help="seconds bench_kernels times each roof or peak for (default: Google Benchmark's)")
    return ap


def parse_suite_arguments(ap, script):
    """The arguments, with args.cpullm, and args.suite and args.command: the script's name and the
    command line that reproduces its runs, as each stored run records them."""
    args = ap.parse_args()
    args.cpullm = os.path.join(args.build, "cpullm")
    args.suite = os.path.splitext(os.path.basename(script))[0]
    args.command = shlex.join([f"suites/{os.path.basename(script)}", *sys.argv[1:]])
    if "://" not in args.db and os.path.dirname(args.db):
        os.makedirs(os.path.dirname(args.db), exist_ok=True)
    return args


def store_flags(args, reference, rate, unit, work_per_token):
    """cpullm bench's flags that store its points in --db as this suite's, held against `rate`
    (`unit` per second) with `work_per_token` units a token (docs/bench.md, "--suite")."""
    return ["--db", args.db, "--no-regions", "--suite", args.suite, "--suite-command", args.command, "--reference", reference,
            "--reference-rate", repr(float(rate)), "--reference-unit", unit, "--work-per-token", repr(float(work_per_token))]


def main():
    ap = suite_arguments(__doc__)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--isa", default="avx2,avx512")
    ap.add_argument("--cases", default="tinyllama:q8_0,tinyllama:q4_0,llama7b-4l:q8_0,llama7b-4l:q4_0")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--baseline", help="another build folder whose cpullm runs each case next to this one's, taking turns going first")
    ap.add_argument("--fresh-copies", action="store_true",
                    help="decode each run from its own copy of the model, dropped from the page cache first (read from disk)")
    args = parse_suite_arguments(ap, __file__)
    builds = [("", args.cpullm)] + ([("base", os.path.join(args.baseline, "cpullm"))] if args.baseline else [])
    os.makedirs(args.models, exist_ok=True)
    print(f"{'model':<12} {'format':<6} {'isa':<7} {'build':<5} {'MB/token':>9} {'tokens/s':>9} {'GB/s':>7} "
          f"{'read GB/s':>11} {'of roof':>8} {'paired':>7} {'p50':>5} {'cache GB/s':>10} {'2M pages':>9}")
    results = {}  # (shape, fmt, isa) -> {"roof": [..], "steady": [..], "tps": {build: [..]}, "paired": [..], "p50": [..], "cache": [..], "bytes": n}
    for repetition in range(args.repeat):
        for case in args.cases.split(","):
            shape, fmt = case.split(":")
            path = model_file(args, shape, fmt)
            per_token = weight_bytes_per_token(args, path)
            for isa in args.isa.split(","):
                entry = results.setdefault((shape, fmt, isa), {"roof": [], "steady": [], "tps": {}, "paired": [], "p50": [],
                                                               "cache": [], "bytes": per_token})
                before = read_bandwidth(args)
                cache = cache_rate(args, shape, fmt, isa)
                entry["cache"].append(cache / before)
                # The builds take turns going first (ABBA), so that whatever the first run after a
                # roof measurement meets does not fall on one build only. Only this build pairs its
                # steps with reads and is stored (a baseline may predate --roof-pairs and --suite);
                # the timed steps come first.
                runs = []
                for name, cpullm in (builds if repetition % 2 == 0 else builds[::-1]):
                    runs.append((name, *decode_speed(args, cpullm, path, isa, stored=name == "" and (before, per_token))))
                after = read_bandwidth(args)
                entry["roof"].append(before)
                entry["steady"].append(abs(after - before) <= 0.1 * max(before, after))
                for name, tps, pages, paired, p50, step_bytes in runs:
                    entry["tps"].setdefault(name, []).append(tps)
                    if name == "":
                        if step_bytes != per_token:
                            sys.exit(f"{path}: cpullm bench counts {step_bytes} weight bytes a step, this script {per_token}")
                        entry["paired"].append(paired)
                        entry["p50"].append(p50)
                    achieved = per_token * tps
                    pair_columns = f"{paired:7.0%} {p50:5.0%}" if name == "" else f"{'':7} {'':5}"
                    print(f"{shape:<12} {fmt:<6} {isa:<7} {name:<5} {per_token / 1e6:9.1f} {tps:9.2f} "
                          f"{achieved / 1e9:7.1f} {before / 1e9:5.1f}/{after / 1e9:<5.1f} {achieved / before:8.0%} "
                          f"{pair_columns} {cache / 1e9:10.1f} {pages:>9}", flush=True)
    if args.repeat > 1 or args.baseline:
        print(f"\nmedian (range) over {args.repeat} repetitions; read GB/s: the roof read before each case's runs; "
              "of roof: each run against it, over all runs and over the steady ones (the roof read after within "
              "10%); paired, p50: the in-process pairs of each run (this build); cache: the kernel in cache over "
              "the roof read before it"
              + ("; ratio: this build's tokens/s over the baseline's, run after run" if args.baseline else ""))
        percent = lambda v: f"{v:.0%}"
        for (shape, fmt, isa), entry in results.items():
            for name, _ in builds:
                tps = entry["tps"][name]
                of_roof = [entry["bytes"] * t / r for t, r in zip(tps, entry["roof"])]
                steady = [share for share, ok in zip(of_roof, entry["steady"]) if ok]
                line = (f"{shape:<12} {fmt:<6} {isa:<7} {name:<5} tokens/s {spread(tps, lambda v: f'{v:.1f}')}  "
                        f"read GB/s {spread(entry['roof'], lambda v: f'{v / 1e9:.1f}')}  "
                        f"of roof {spread(of_roof, percent)}, steady {len(steady)} of {len(of_roof)}"
                        + (f": {spread(steady, percent)}" if steady else ""))
                if name == "":
                    line += (f"  paired {spread(entry['paired'], percent)}  p50 {spread(entry['p50'], percent)}"
                             f"  cache {spread(entry['cache'], lambda v: f'{v:.2f}x')}")
                else:
                    ratios = [a / b for a, b in zip(entry["tps"][""], tps)]
                    line += f"  ratio {spread(ratios, lambda v: f'{v:.2f}')}"
                print(line)
        # Every run of every case, by how much faster than the roof its kernel computed in cache.
        runs = [(c, p) for entry in results.values() for c, p in zip(entry["cache"], entry["paired"])]
        print("\npaired share of the roof by the kernel's rate in cache over the roof (every run of every case):")
        for low, high in ((0, 1.0), (1.0, 1.3), (1.3, float("inf"))):
            shares = [p for c, p in runs if low <= c < high]
            label = f"{low:.1f}x-{high:.1f}x" if high != float("inf") else f">= {low:.1f}x"
            print(f"  {label:<10} " + (f"{spread(shares, percent)} over {len(shares)} runs" if shares else "no runs"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
