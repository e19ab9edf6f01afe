#!/usr/bin/python3
"""Prefill speed against this machine's compute peak, measured in the same run.

A prompt's projections are matrix products: integer dot products for Q8_0 and Q4_0 weights
(activations quantized per 32 values), FP32 FMAs for F16 and BF16 weights. The issue's targets
for a 512-token prompt on 2 threads at the 7B width: at least 50% of the int8 peak for Q8_0, 60% for
Q4_0, 70% of the FMA peak for the float formats. For each case this script reads the peak at the
case's ISA level and thread count (bench_kernels' peak/KIND/ISA/THREADS: KIND 1 the int8 peak,
VNNI vpdpbusd at AVX-512 and maddubs + madd + add at AVX2, KIND 0 FP32 FMA), runs `cpullm bench -p
TOKENS -n 0 -r REPS`, and reads the peak again: the share is the prefill's operations per second
over the peak read before it, and the read after says whether the host held steady (a shared
host's peak can move by a quarter from one minute to the next).

Every run is stored in the results database (--db, default results/results.db) by `cpullm bench
--db --suite prefill_compute`, with the peak read before it and the operations a token takes:
`cpullm report` shows each run's share of the peak and this script's command line that
reproduces it (docs/bench.md, "--suite").

Operations per token are the projections' (q, k, v, o, gate, up, down, and the output layer's for
the prompt's last token), from `cpullm profile --json`'s analytic counts, a multiply-add counting
two as the peaks do; attention (about 1% of a 512-token prompt's operations at the 7B width) and
the element-wise ops are left out, their time is not. Models are made as suites/decode_bandwidth.py
makes them (gen-model, then quantize) into --models, or reused from there.

  /usr/bin/python3 suites/prefill_compute.py --build build --models /tmp/decode-models --repeat 3
  (shapes: tinyllama, llama7b-4l, tiny; --db FILE|URL, --roof-min-time SECONDS)
"""
import json
import os
import statistics
import sys

# Run as a script, its own folder is first on the module path: decode_bandwidth is beside it.
from decode_bandwidth import (SHAPES, bench_kernels, model_file, parse_suite_arguments, run, spread, store_flags,
                              suite_arguments)

TARGETS = {"q4_0": 0.60, "q8_0": 0.50, "f16": 0.70, "bf16": 0.70}
INTEGER_FORMATS = {"q4_0", "q8_0"}
BENCH_ISAS = {"avx2": 1, "avx512": 2}
PROJECTIONS = {"q_proj", "k_proj", "v_proj", "o_proj", "ffn_gate", "ffn_up", "ffn_down", "lm_head"}


def peak(args, fmt, isa):
    """Operations/s of the peak the format's kernels run on: int8 or FP32 FMA, at `isa`."""
    kind = 1 if fmt in INTEGER_FORMATS else 0
    name = f"peak/{kind}/{BENCH_ISAS[isa]}/{args.threads}/"
    benchmarks = bench_kernels(args, f"^{name}")
    counter = "OP/s" if kind == 1 else "FLOP/s"
    rates = [b[counter] for b in benchmarks if counter in b]
    if not rates:
        sys.exit(f"bench_kernels measured no {name} peak: {benchmarks}")
    return name.rstrip("/"), rates[0]


def operations_per_token(args, path):
    """The projections' analytic operations per prompt token, from one profiled prefill."""
    out = run([args.cpullm, "profile", "-m", path, "-p", str(args.tokens), "-n", "1", "-t", str(args.threads),
               "--no-counters", "--json"]).stdout
    prefill = next(phase for phase in json.loads(out)["phases"] if phase["name"] == "prefill")
    return sum(r["flops"] for r in prefill["regions"] if r["name"] in PROJECTIONS) / args.tokens


def prefill_speed(args, path, isa, peak_name, peak_rate, ops):
    """tokens/s of the prefill, stored in --db against the peak read before it."""
    proc = run([args.cpullm, "bench", "-m", path, "-p", str(args.tokens), "-n", "0", "-t", str(args.threads),
                "--isa", isa, "-r", str(args.reps), "-o", "json"]
               + store_flags(args, f"bench_kernels {peak_name}, read before the run", peak_rate, "operations", ops))
    return json.loads(proc.stdout)[0]["avg_ts"]


def main():
    ap = suite_arguments(__doc__)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--reps", type=int, default=3, help="cpullm bench repetitions per run (their mean tokens/s)")
    ap.add_argument("--isa", default="avx512,avx2")
    ap.add_argument("--cases", default="llama7b-4l:q4_0,llama7b-4l:q8_0,llama7b-4l:f16")
    ap.add_argument("--repeat", type=int, default=1)
    args = parse_suite_arguments(ap, __file__)
    os.makedirs(args.models, exist_ok=True)
    cases = [case.split(":") for case in args.cases.split(",")]
    for shape, fmt in cases:
        if shape not in SHAPES or fmt not in TARGETS:
            sys.exit(f"--cases: '{shape}:{fmt}' is not one of the shapes {sorted(SHAPES)} with a format of {sorted(TARGETS)}")
    for isa in args.isa.split(","):
        if isa not in BENCH_ISAS:
            sys.exit(f"--isa: '{isa}' is not one of {sorted(BENCH_ISAS)}")
    print(f"{'model':<12} {'format':<6} {'isa':<7} {'tokens/s':>9} {'GOP/s':>8} {'peak GOP/s':>15} {'of peak':>8} {'target':>7}")
    results = {}  # (shape, fmt, isa) -> [share, ...]
    for _ in range(args.repeat):
        for shape, fmt in cases:
            path = model_file(args, shape, fmt)
            ops = operations_per_token(args, path)
            for isa in args.isa.split(","):
                peak_name, before = peak(args, fmt, isa)
                tps = prefill_speed(args, path, isa, peak_name, before, ops)
                after = peak(args, fmt, isa)[1]
                share = tps * ops / before
                results.setdefault((shape, fmt, isa), []).append(share)
                print(f"{shape:<12} {fmt:<6} {isa:<7} {tps:9.1f} {tps * ops / 1e9:8.0f} {before / 1e9:7.0f}/{after / 1e9:<7.0f} "
                      f"{share:8.0%} {TARGETS[fmt]:7.0%}", flush=True)
    if args.repeat > 1:
        print(f"\nshare of the peak, median (range) over {args.repeat} repetitions; met: runs at or above the target")
        for (shape, fmt, isa), shares in results.items():
            met = sum(s >= TARGETS[fmt] for s in shares)
            print(f"{shape:<12} {fmt:<6} {isa:<7} {spread(shares, lambda v: f'{v:.0%}')}  target {TARGETS[fmt]:.0%}, "
                  f"met {met} of {len(shares)}, median {'met' if statistics.median(shares) >= TARGETS[fmt] else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
