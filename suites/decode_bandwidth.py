#!/usr/bin/python3
"""Decode speed against this machine's memory roof, measured in the same run.

Decoding one token reads every weight matrix once (and one embedding row), so
tokens/s x weight bytes per token is the bandwidth decode achieves; the issue's target is
at least 85% of the read bandwidth that bench_kernels' memory_read measures with the same
thread count, right before. For each model: generate (or reuse) a synthetic model at a real
shape, quantize it, run `cpullm generate --ignore-eos`, and print one line per case.

Usage: suites/decode_bandwidth.py [--build build] [--models DIR] [--threads 2] [--tokens 64]
       [--isa avx2,avx512] [--cases tinyllama:q8_0,tinyllama:q4_0,llama7b-4l:q8_0,llama7b-4l:q4_0]
"""
import argparse
import json
import os
import re
import subprocess
import sys

SHAPES = {  # name: gen-model flags (F16 sources; quantize derives the rest)
    "tinyllama": ["--shape", "tinyllama-1.1b"],
    "llama7b-4l": ["--shape", "llama-7b", "--layers", "4"],
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
    """Every tensor is read once per token except the embedding table, of which one row."""
    info = json.loads(run([args.cpullm, "info", path, "--json"]).stdout)
    total = 0
    for t in info["tensors"]:
        if t["name"] == "token_embd.weight":
            total += t["bytes"] // t["shape"][1]
        else:
            total += t["bytes"]
    return total


def read_bandwidth(args):
    out = run([os.path.join(args.build, "suites", "kernels", "bench_kernels"),
               f"--benchmark_filter=memory_read/{args.threads}/", "--benchmark_format=json"]).stdout
    return json.loads(out)["benchmarks"][0]["bytes_per_second"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--models", default="models")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--isa", default="avx2,avx512")
    ap.add_argument("--cases", default="tinyllama:q8_0,tinyllama:q4_0,llama7b-4l:q8_0,llama7b-4l:q4_0")
    args = ap.parse_args()
    args.cpullm = os.path.join(args.build, "cpullm")
    os.makedirs(args.models, exist_ok=True)
    print(f"{'model':<12} {'format':<6} {'isa':<7} {'MB/token':>9} {'tokens/s':>9} {'GB/s':>7} "
          f"{'read GB/s':>10} {'of roof':>8}")
    for case in args.cases.split(","):
        shape, fmt = case.split(":")
        path = model_file(args, shape, fmt)
        per_token = weight_bytes_per_token(args, path)
        for isa in args.isa.split(","):
            roof = read_bandwidth(args)
            proc = run([args.cpullm, "generate", "-m", path, "-p", "Once upon a time", "-n", str(args.tokens),
                        "--ignore-eos", "-t", str(args.threads), "--isa", isa, "-c", "512"])
            tps = float(re.search(r"generated \d+ tokens, ([\d.]+) tokens/s", proc.stderr).group(1))
            achieved = per_token * tps
            print(f"{shape:<12} {fmt:<6} {isa:<7} {per_token / 1e6:9.1f} {tps:9.2f} {achieved / 1e9:7.1f} "
                  f"{roof / 1e9:10.1f} {achieved / roof:8.0%}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
