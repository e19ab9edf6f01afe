#!/usr/bin/python3
"""The seed-claims audit's measurements on this host: scripts/run-default's audit step.

For every claim of ../shared/seed one machine can test, `cpullm bench` points that differ in one
thing only, stored in the results database, where the report's audit (reports/claims.py) computes
the verdicts from them:
  C5   -t 1 with a CPU set that leaves a core to the system (--cpuset) against -t 1 without
  C6   the model in F32 against INT8 per channel and Q8_0 (decode), with eval-quant's accuracy of
       each against the F16 source (mean KL, top-1 agreement), stored as results of test "accuracy"
  C7   Top-K 20% sparse against dense, both F16 (decode)
  C8   --bind none against numa, on a host with more than one NUMA node (else the report says why not)
  C9   --prefetch 0 against 1 (decode)
  C10  --attn-tile 8x8 against 128x128 on a 512-token prompt
  C11  two processes sharing the mapped model (--processes 2)
The speed pairs run in rounds of -r REPETITIONS each; after every round a claim whose interval
(reports/claims.py's speed_effect: a bootstrap over the stored repetitions) is tight, or already
decides its verdict, stops, and the rest go on while the budget lasts. The model variants
(eval-quant --files) are written once into --work.

    python3 suites/audit.py --model MODEL_F16.gguf --db results/results.db [--budget 3m]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from reports import claims  # noqa: E402  (the verdicts' own pairing and interval)
from reports.resultsdb import Database  # noqa: E402
from tuning.strategies import parse_duration  # noqa: E402

TIGHT = 0.05  # an interval narrower than 5% of its effect needs no more rounds
FORMATS = ["f32", "int8-channel", "q8_0", "f16+sparse0.2"]  # eval-quant's names, also its --files names


def run(cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode:
        sys.exit(f"audit: {' '.join(cmd)}: {done.stderr.strip()[-2000:]}")
    return done.stdout


def has_accuracy(args):
    """Whether the database already holds eval-quant's accuracy of this model's variants."""
    if not os.path.exists(args.db):
        return False
    rows = Database(args.db).query("SELECT 1 FROM results WHERE test = 'accuracy' AND model_filename = ?", (args.model,))
    return bool(rows)


def variants(args):
    """The model in each format the claims compare, written by eval-quant, which scores each
    against the F16 source on the way; returns ({format: path}, the scores or None). eval-quant
    runs where a variant is missing or the database lacks the scores."""
    paths = {fmt: os.path.join(args.work, f"{fmt}.gguf") for fmt in FORMATS}
    if all(os.path.exists(p) for p in paths.values()) and has_accuracy(args) and not args.accuracy_again:
        return paths, None
    os.makedirs(args.work, exist_ok=True)
    scores = json.loads(run([args.cpullm, "eval-quant", "-m", args.model, "--formats", ",".join(FORMATS), "--files", args.work,
                             "--window", "128", "--json"]))
    return paths, scores


def store_accuracy(args, scores):
    """eval-quant's figures as results of test "accuracy", one run, through cpullm db import."""
    info = json.loads(run([args.cpullm, "info", args.model, "--json"]))
    results = [{"case_name": f"accuracy/{s['format']}", "test": "accuracy", "format": s["format"].split("+")[0],
                "model_filename": args.model, "model_type": info.get("model_type"),
                "config_json": json.dumps({"format": s["format"], "kv_type": s.get("kv_type"), "source": args.model}),
                "metrics_json": json.dumps({"kl_mean": s["mean_kl"], "top1": s["top1_agreement"], "perplexity": s["perplexity"],
                                            "positions": s["positions"], "file_bytes": s["file_bytes"]})}
               for s in scores if s["format"] != scores[0]["format"]]
    document = {"run": {"kind": "audit", "command": f"cpullm eval-quant -m {args.model} --formats {','.join(FORMATS)}"},
                "results": results}
    run([args.cpullm, "db", "--db", args.db, "import", "-"], input=json.dumps(document))


def pairs(args, paths, nodes):
    """claim id -> the bench commands of one round (each a list of arguments after `bench`)."""
    decode = ["-p", "0", "-n", str(args.gen)]
    out = {
        "C5": [["-m", args.model, *decode, "-t", "1", "--cpuset", str(os.cpu_count() - 1)], ["-m", args.model, *decode, "-t", "1"]],
        "C6": [["-m", ",".join(paths[f] for f in ("f32", "int8-channel", "q8_0")), *decode]],
        "C7": [["-m", f"{args.model},{paths['f16+sparse0.2']}", *decode]],
        "C9": [["-m", args.model, *decode, "--prefetch", "0,1"]],
        "C10": [["-m", args.model, "-p", "512", "-n", "0", "--attn-tile", "8x8,128x128"]],
    }
    if nodes > 1:
        out["C8"] = [["-m", args.model, *decode, "--bind", "none,numa"]]
    return out


def interval(db, claim):
    """(effect, low, high) of a claim's pairs in the database, as the report computes them."""
    contents = Database(db).load()
    spec = claims.SPEED_CLAIMS[claim]
    found = claims.paired_results(contents, spec.option, spec.is_a, spec.is_b, spec.test)
    return claims.speed_effect(contents, found)[:3] if found else (None, None, None)


def settled(effect, low, high, claimed):
    """Whether more rounds would change nothing worth the time: a tight interval, or one that
    already decides the verdict."""
    return effect is not None and ((high - low) / effect <= TIGHT or claims.judge(low, high, claimed) != "inconclusive")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="the F16 model the claims are measured on")
    p.add_argument("--db", required=True, help="results database the points go to")
    p.add_argument("--cpullm", default=os.path.join(HERE, "..", "build", "cpullm"))
    p.add_argument("--work", default=None, help="where the model's variants are written (default: beside the model, audit/)")
    p.add_argument("--budget", default=os.environ.get("CPULLM_AUDIT_BUDGET", "3m"), help="time for the whole audit (90s, 3m, ...)")
    p.add_argument("--repetitions", type=int, default=3, help="repetitions of each point per round")
    p.add_argument("--gen", type=int, default=32, help="tokens each decode point generates")
    p.add_argument("--accuracy-again", action="store_true", help="rewrite the variants and score them again")
    args = p.parse_args()
    try:
        budget = parse_duration(args.budget)
    except ValueError as e:
        sys.exit(f"audit: {e}")
    args.work = args.work or os.path.join(os.path.dirname(os.path.abspath(args.model)), "audit")
    start = time.monotonic()

    def left():
        return budget - (time.monotonic() - start)

    paths, scores = variants(args)
    if scores:
        store_accuracy(args, scores)
    nodes = len(glob.glob("/sys/devices/system/node/node[0-9]*")) or 1
    rounds = pairs(args, paths, nodes)
    if nodes <= 1:
        print("audit: C8 (binding) not measured: this host has one NUMA node", flush=True)
    bench = [args.cpullm, "bench", "-r", str(args.repetitions), "-o", "jsonl", "--db", args.db, "--no-regions"]
    run([*bench[:2], "-m", args.model, "-p", "0", "-n", str(args.gen), "--processes", "2", "-r", "1", "--db", args.db])  # C11
    last = {}  # claim -> seconds its last round took
    open_claims = list(rounds)
    round_number = 0
    while open_claims and left() > 0:
        round_number += 1
        for claim in list(open_claims):
            if left() < last.get(claim, 0):
                open_claims.remove(claim)
                continue
            began = time.monotonic()
            for flags in rounds[claim]:
                run([*bench, *flags])
            last[claim] = time.monotonic() - began
            effect, low, high = interval(args.db, claim)
            shown = f"{effect:.2f}x ({low:.2f}-{high:.2f})" if effect else "no interval yet"
            print(f"audit: round {round_number} {claim}: {shown}, {last[claim]:.0f} s", flush=True)
            if settled(effect, low, high, claims.SPEED_CLAIMS[claim].claimed):
                open_claims.remove(claim)
    print(f"audit: {time.monotonic() - start:.0f} s of {budget:.0f}; "
          f"{'every claim settled' if not open_claims else 'budget spent with ' + ', '.join(open_claims) + ' open'}", flush=True)


if __name__ == "__main__":
    main()
