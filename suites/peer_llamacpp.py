#!/usr/bin/env python3
"""cpullm against llama.cpp on the same K-quant files, measured in one alternating run.

For each shape it writes an F16 model (`cpullm gen-model`), quantizes it to each type twice, by
`cpullm quantize` and by llama.cpp's `llama-quantize`, then runs decode (tg) and prefill (pp)
on every file with `cpullm bench` and `llama-bench`, alternating engine and order each round, at
the same threads. cpullm also decodes each file at forced AVX2 (`--isa avx2`). It prints one line per
run and then, per file and test, the medians and the ratios cpullm / llama.cpp and, for decode,
AVX2 / best.

    python3 suites/peer_llamacpp.py --llama-bin "$(scripts/peer-llamacpp)" [--models DIR] [--rounds N]

llama.cpp comes from scripts/peer-llamacpp (node-llama-cpp's copy of its source); CI never runs this.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = {"tinyllama": ["--shape", "tinyllama-1.1b"], "7b-4l": ["--shape", "llama-7b", "--layers", "4"]}
TYPES = {"q4_k_m": "Q4_K_M", "q6_k": "Q6_K"}  # cpullm --type -> llama-quantize's name


def run(cmd, env=None):
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode:
        sys.exit(f"{' '.join(cmd)}: {done.stderr.strip()[-2000:]}")
    return done.stdout


def models(args):
    """{(shape, type, quantizer): path}, written once into args.models."""
    os.makedirs(args.models, exist_ok=True)
    out = {}
    for shape in args.shapes:
        flags = SHAPES[shape]
        source = os.path.join(args.models, f"{shape}-f16.gguf")
        if not os.path.exists(source):
            run([args.cpullm, "gen-model", *flags, "--dtype", "f16", "-o", source])
        for ours in args.types:
            theirs = TYPES[ours]
            for quantizer in ("cpullm", "llama.cpp"):
                path = os.path.join(args.models, f"{shape}-{ours}-by-{quantizer}.gguf")
                if not os.path.exists(path):
                    if quantizer == "cpullm":
                        run([args.cpullm, "quantize", source, path, "--type", ours])
                    else:
                        run([os.path.join(args.llama_bin, "llama-quantize"), source, path, theirs])
                out[(shape, ours, quantizer)] = path
    return out


def cpullm_bench(args, path, isa=None):
    """tg and pp tokens/s; at a forced ISA tg alone (the target compares decode across ISAs)."""
    prompt = 0 if isa else args.prompt
    cmd = [args.cpullm, "bench", "-m", path, "-p", str(prompt), "-n", str(args.gen), "-t", str(args.threads),
           "-r", str(args.repetitions), "-o", "jsonl"] + (["--isa", isa] if isa else [])
    return {("pp" if r["n_prompt"] else "tg"): r["avg_ts"] for r in map(json.loads, run(cmd).splitlines())}


def llama_bench(args, path):
    cmd = [os.path.join(args.llama_bin, "llama-bench"), "-m", path, "-p", str(args.prompt), "-n", str(args.gen),
           "-t", str(args.threads), "-r", str(args.repetitions), "-o", "json"]
    return {("pp" if r["n_prompt"] else "tg"): r["avg_ts"] for r in json.loads(run(cmd))}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--llama-bin", required=True, help="folder with llama-bench and llama-quantize")
    p.add_argument("--cpullm", default=os.path.join(HERE, "..", "build", "cpullm"))
    p.add_argument("--models", default=os.path.join(HERE, "..", "build", "peer-models"))
    p.add_argument("--rounds", type=int, default=3, help="0: only write the models")
    p.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    p.add_argument("--types", nargs="+", choices=list(TYPES), default=list(TYPES))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--prompt", type=int, default=512)
    p.add_argument("--gen", type=int, default=128)
    p.add_argument("--repetitions", type=int, default=2)
    args = p.parse_args()

    files = models(args)
    if not args.rounds:
        return
    runners = {"cpullm": lambda path: cpullm_bench(args, path), "cpullm-avx2": lambda path: cpullm_bench(args, path, "avx2"),
               "llama.cpp": lambda path: llama_bench(args, path)}
    results = {}  # (file key, engine, test) -> [tokens/s]
    for r in range(args.rounds):
        for key, path in files.items():
            engines = list(runners) if r % 2 == 0 else list(reversed(runners))
            for engine in engines:
                for test, tps in runners[engine](path).items():
                    results.setdefault((key, engine, test), []).append(tps)
                    print(r, *key, engine, test, f"{tps:.2f}", flush=True)

    print(f"\n| shape | type | quantized by | test | cpullm tok/s | llama.cpp tok/s | cpullm / llama.cpp | AVX2 / best |")
    print("|---|---|---|---|---|---|---|---|")
    for key in files:
        for test in ("tg", "pp"):
            ours, theirs = (results[(key, e, test)] for e in ("cpullm", "llama.cpp"))
            ratio = statistics.median(a / b for a, b in zip(ours, theirs))
            avx2 = results.get((key, "cpullm-avx2", test))
            isa = f"{statistics.median(a / b for a, b in zip(avx2, ours)):.2f}" if avx2 else "–"
            name = f"{test}{args.gen if test == 'tg' else args.prompt}"
            print(f"| {key[0]} | {key[1]} | {key[2]} | {name} | {statistics.median(ours):.1f} | "
                  f"{statistics.median(theirs):.1f} | {ratio:.2f} | {isa} |")


if __name__ == "__main__":
    main()
