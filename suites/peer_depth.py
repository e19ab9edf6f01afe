#!/usr/bin/env python3
"""Decode at depth and long prefill: cpullm against llama.cpp and ik_llama.cpp, on the same files,
in one alternating run.

For each shape and type it quantizes the F16 model with llama.cpp's `llama-quantize --pure` (one
file all engines read), then per depth D runs, one after the other: cpullm's decode of G tokens
after D cached positions with each KV cache type (`bench -p 0 -n G -d D --kv-type T`), llama.cpp's
(`llama-bench -p 0 -n G -d D`, its F16 cache) and ik_llama.cpp's (`llama-bench -gp D,G -rtr 1 -fa
0,1`: G tokens generated after a D-token prompt, timed alone; F16 cache). Then the prefill of P
tokens (cpullm `-p P -n 0`; ik `-p P -n 0 -rtr 1 -fa 0,1`). The engines' order flips each round.

The memory roof of each decode point is the bytes one step reads, weights and cache (`cpullm info
FILE --costs --position D --kv-type T`), over the read bandwidth measured at the start of the run
(bench_kernels' memory_read, as suites/decode_bandwidth.py takes it).

    python3 suites/peer_depth.py --llama-bin "$(scripts/peer-llamacpp)" --ik-bin IK_BUILD/bin [--models DIR]

ik_llama.cpp is built as ../shared/reference/peers.md says; CI never runs this. The table it prints
is the one in docs/bench.md, "At depth".
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import decode_bandwidth  # noqa: E402  (the read roof, measured as the decode suite measures it)
from peer_llamacpp import run  # noqa: E402

SHAPES = {"tinyllama": ["--shape", "tinyllama-1.1b"], "7b-4l": ["--shape", "llama-7b", "--layers", "4"]}
TYPES = {"q4_0": "Q4_0", "q8_0": "Q8_0"}  # cpullm's name -> llama-quantize's


def model_file(args, shape, kind):
    source = os.path.join(args.models, f"{shape}-f16.gguf")
    if not os.path.exists(source):
        run([args.cpullm, "gen-model", *SHAPES[shape], "--dtype", "f16", "-o", source])
    path = os.path.join(args.models, f"{shape}-{kind}-by-llama.cpp.gguf")
    if not os.path.exists(path):  # absolute: llama-quantize reads a bare name's leading number as the type
        run([os.path.join(args.llama_bin, "llama-quantize"), "--pure", source, os.path.abspath(path), TYPES[kind]])
    return path


def cpullm(args, path, depth, gen, prompt=0, kv_type=None):
    cmd = [args.cpullm, "bench", "-m", path, "-p", str(prompt), "-n", str(gen), "-t", str(args.threads),
           "-r", str(args.repetitions), "-o", "jsonl"] + (["-d", str(depth), "--kv-type", kv_type] if kv_type else [])
    return json.loads(run(cmd).splitlines()[0])["avg_ts"]


def llama_cpp(args, path, depth, gen):
    cmd = [os.path.join(args.llama_bin, "llama-bench"), "-m", path, "-p", "0", "-n", str(gen), "-d", str(depth),
           "-t", str(args.threads), "-r", str(args.repetitions), "-o", "json"]
    return json.loads(run(cmd))[0]["avg_ts"]


def ik(args, path, flash, depth=0, gen=0, prompt=0):
    test = ["-p", "0", "-n", "0", "-gp", f"{depth},{gen}"] if gen else ["-p", str(prompt), "-n", "0"]
    cmd = [os.path.join(args.ik_bin, "llama-bench"), "-m", path, *test, "-rtr", "1", "-fa", str(flash),
           "-t", str(args.threads), "-r", str(args.repetitions), "-o", "json"]
    return json.loads(run(cmd))[0]["avg_ts"]


def step_bytes(args, path, depth, kv_type):
    """Bytes one decode step reads at `depth` cached positions: the engine's own count."""
    costs = json.loads(run([args.cpullm, "info", path, "--costs", "--position", str(depth), "--kv-type", kv_type, "--json"]))
    return costs["decode_token"]["bytes"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--llama-bin", required=True, help="folder with llama.cpp's llama-bench and llama-quantize")
    p.add_argument("--ik-bin", required=True, help="folder with ik_llama.cpp's llama-bench")
    p.add_argument("--cpullm", default=os.path.join(HERE, "..", "build", "cpullm"))
    p.add_argument("--build", default=os.path.join(HERE, "..", "build"), help="the build folder (bench_kernels)")
    p.add_argument("--models", default=os.path.join(HERE, "..", "build", "peer-models"))
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    p.add_argument("--types", nargs="+", choices=list(TYPES), default=list(TYPES))
    p.add_argument("--depths", type=int, nargs="+", default=[2048, 8192])
    p.add_argument("--kv-types", nargs="+", default=["f32", "f16", "q8_0"])
    p.add_argument("--gen", type=int, default=32, help="tokens decoded at each depth")
    p.add_argument("--prompt", type=int, default=8192, help="prefill length; 0: no prefill test")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repetitions", type=int, default=1)
    args = p.parse_args()
    args.roof_min_time = 0.5

    roof = decode_bandwidth.read_bandwidth(args)
    print(f"read roof: {roof / 1e9:.1f} GB/s (bench_kernels memory_read, {args.threads} threads)", flush=True)
    files = {(shape, kind): model_file(args, shape, kind) for shape in args.shapes for kind in args.types}
    engines = {f"cpullm {kv}": (lambda path, d, kv=kv: cpullm(args, path, d, args.gen, kv_type=kv)) for kv in args.kv_types}
    engines["llama.cpp"] = lambda path, d: llama_cpp(args, path, d, args.gen)
    engines["ik -fa 0"] = lambda path, d: ik(args, path, 0, d, args.gen)
    engines["ik -fa 1"] = lambda path, d: ik(args, path, 1, d, args.gen)
    prefill = {"cpullm": lambda path: cpullm(args, path, 0, 0, args.prompt),
               "ik -fa 0": lambda path: ik(args, path, 0, prompt=args.prompt),
               "ik -fa 1": lambda path: ik(args, path, 1, prompt=args.prompt)}
    tg, pp = {}, {}  # (file key, depth, engine) -> [tokens/s]; (file key, engine) -> [tokens/s]
    for r in range(args.rounds):
        for key, path in files.items():
            for depth in args.depths:
                for name in list(engines) if r % 2 == 0 else list(reversed(engines)):
                    tps = engines[name](path, depth)
                    tg.setdefault((key, depth, name), []).append(tps)
                    print(r, *key, f"tg{args.gen}@d{depth}", name, f"{tps:.2f}", flush=True)
            if args.prompt:
                for name in list(prefill) if r % 2 == 0 else list(reversed(prefill)):
                    tps = prefill[name](path)
                    pp.setdefault((key, name), []).append(tps)
                    print(r, *key, f"pp{args.prompt}", name, f"{tps:.2f}", flush=True)

    med = statistics.median
    kvs = [f"cpullm {kv}" for kv in args.kv_types]
    print(f"\n| shape | type | depth | {' | '.join(kvs)} | llama.cpp | ik -fa 0 | ik -fa 1 | f16 / llama.cpp | "
          f"f16 / ik best | f16 share of roof |")
    print("|" + "---|" * (len(kvs) + 9))
    for key, path in files.items():
        for depth in args.depths:
            t = {name: med(tg[(key, depth, name)]) for name in engines}
            f16 = t.get("cpullm f16")
            share = f"{f16 * step_bytes(args, path, depth, 'f16') / roof:.0%}" if f16 else "–"
            ratios = (f"{f16 / t['llama.cpp']:.2f} | {f16 / max(t['ik -fa 0'], t['ik -fa 1']):.2f}" if f16 else "– | –")
            print(f"| {key[0]} | {key[1]} | {depth} | {' | '.join(f'{t[k]:.1f}' for k in kvs)} | {t['llama.cpp']:.1f} | "
                  f"{t['ik -fa 0']:.1f} | {t['ik -fa 1']:.1f} | {ratios} | {share} |")
    if args.prompt:
        print(f"\n| shape | type | cpullm pp{args.prompt} | ik -fa 0 | ik -fa 1 | cpullm / ik best |")
        print("|---|---|---|---|---|---|")
        for key in files:
            t = {name: med(pp[(key, name)]) for name in prefill}
            print(f"| {key[0]} | {key[1]} | {t['cpullm']:.1f} | {t['ik -fa 0']:.1f} | {t['ik -fa 1']:.1f} | "
                  f"{t['cpullm'] / max(t['ik -fa 0'], t['ik -fa 1']):.2f} |")


if __name__ == "__main__":
    main()
