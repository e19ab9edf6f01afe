"""Measuring one point: the model file in the point's format (quantized once into a cache
folder), one run of `cpullm bench` (or, in a build without bench, `cpullm generate`'s timing
line), and an optional background noise load."""
import json
import os
import re
import subprocess
import sys

from . import registry
from .space import DIMENSIONS
from reports.resultsdb import is_postgres, without_password  # noqa: F401 (is_postgres: for sweep)

# Bench sets every dimension; generate only those it has flags for.
BENCH_FEATURES = {k for k, (flag, _, _) in DIMENSIONS.items() if flag}
GENERATE_FEATURES = {"threads", "bind", "cpuset", "housekeeping", "attn_tile"}


class MeasureError(Exception):
    """A run that failed: the message has the command and its last stderr line."""


def shown(cmd):
    """A command as messages, the sweep's state file and its table show it: passwords masked."""
    return " ".join(without_password(a) for a in cmd)


def run_checked(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["(no output)"])[-1].removeprefix("cpullm: error: ")
        raise MeasureError(f"{os.path.basename(cmd[0])} {cmd[1]}: {last} (exit {result.returncode}; command: {shown(cmd)})")
    return result


def has_bench(cpullm):
    """Whether this build has `cpullm bench`: its help lists bench's own flags (a build without
    the subcommand answers `bench --help` with the program's help)."""
    return "--n-prompt" in subprocess.run([cpullm, "bench", "--help"], capture_output=True, text=True).stdout


def model_info(cpullm, path):
    """`cpullm info --json`: the header only, so a model of any size is fine."""
    return json.loads(run_checked([cpullm, "info", path, "--json"]).stdout)


def matrix_format(info):
    """The model's matrix format, named as quantize names it: the type of most matrix bytes."""
    by_type = {}
    for t in info["tensors"]:
        if len(t["shape"]) == 2:
            by_type[t["type"]] = by_type.get(t["type"], 0) + t["bytes"]
    main = max(by_type, key=by_type.get)
    return registry.format_of_type(main)


def quantize_prunes(cpullm):
    """Whether this build's `cpullm quantize` has --sparsity."""
    return "--sparsity" in subprocess.run([cpullm, "quantize", "--help"], capture_output=True, text=True).stdout


def model_for(cpullm, source, source_format, fmt, keep, sparsity, cache_dir):
    """The model file in format `fmt` (with `keep` at full precision, `sparsity` of the weights
    pruned), quantized into cache_dir once; written under a temporary name first, so an
    interrupted quantize leaves nothing."""
    if fmt == source_format and not keep and not sparsity:
        return source
    stem = os.path.splitext(os.path.basename(source))[0]
    suffix = f"-keep-{keep.replace(',', '-').replace('*', 'x')}" if keep else ""
    suffix += f"-sparse{sparsity:g}" if sparsity else ""
    path = os.path.join(cache_dir, f"{stem}-{fmt}{suffix}.gguf")
    if not os.path.exists(path):
        os.makedirs(cache_dir, exist_ok=True)
        cmd = [cpullm, "quantize", source, path + ".part", "--type", fmt] + (["--keep", keep] if keep else [])
        cmd += ["--sparsity", f"{sparsity:g}"] if sparsity else []
        run_checked(cmd)
        os.replace(path + ".part", path)
    return path


def point_flags(point):
    """The bench/generate flags of a point's dimensions (format and keep choose the file)."""
    flags = []
    for key, value in point.items():
        flag = DIMENSIONS[key][0]
        if flag:
            flags += [flag, str(value)]
    return flags


def bench_once(cpullm, model, point, workload, db=None):
    """One `cpullm bench` run: -p PROMPT and -n GEN (each after -d DEPTH filled positions), one
    repetition, JSON lines out."""
    cmd = [cpullm, "bench", "-m", model, "-p", str(workload["prompt"]), "-n", str(workload["gen"]),
           "-r", "1", "-o", "jsonl"] + (["-d", str(workload["depth"])] if workload.get("depth") else []) + point_flags(point)
    # Each sweep run is one repetition: bench's extra instrumented repetition and its roofs
    # would double the time of every run, and the sweep keeps its own rows.
    cmd += ["--db", db, "--no-regions"] if db else []
    lines = [json.loads(line) for line in run_checked(cmd).stdout.splitlines() if line.startswith("{")]
    prefill = next((r for r in lines if r.get("n_gen") == 0), None)
    decode = next((r for r in lines if r.get("n_prompt") == 0), None)
    if not prefill or not decode:
        raise MeasureError(f"{shown(cmd)}: expected a prompt (n_gen 0) and a generation (n_prompt 0) line")
    sample = {"prefill_tps": prefill["avg_ts"], "decode_tps": decode["avg_ts"]}
    sample["ttft_ms"] = prefill.get("ttft_ms") or workload["prompt"] / prefill["avg_ts"] * 1e3
    sample["tpot_ms"] = decode.get("tpot_ms") or 1e3 / decode["avg_ts"]
    if decode.get("itl_p99_ms") is not None:
        sample["itl_p99_ms"] = decode["itl_p99_ms"]
    if decode.get("itl_p50_ms"):
        # The median step's rate: what the machine decodes at between the stalls a shared host
        # puts into some steps (docs/tuning.md, "Page-cache stalls"), which the mean takes in.
        sample["decode_step_tps"] = decode.get("n_seq", 1) * 1e3 / decode["itl_p50_ms"]
    return sample


TIMING = re.compile(r"prompt (\d+) tokens, ([\d.]+) tokens/s \| time to first token ([\d.]+) ms \| "
                    r"generated (\d+) tokens, ([\d.]+) tokens/s")


def generate_once(cpullm, model, point, workload, db=None):
    """One `cpullm generate` run, read from its stderr timing line (no inter-token percentiles).
    The prompt is a repeated word: about one token each, after BOS (the sweep refuses a workload
    depth with this backend)."""
    prompt = " ".join(["the"] * (workload["prompt"] - 1))
    cmd = [cpullm, "generate", "-m", model, "-p", prompt, "-n", str(workload["gen"]), "--ignore-eos",
           "--temp", "0", "-c", str(2 * workload["prompt"] + workload["gen"] + 16)] + point_flags(point)
    match = TIMING.search(run_checked(cmd).stderr)
    if not match:
        raise MeasureError(f"{shown(cmd)}: no timing line on stderr")
    prompt_tokens, prefill_tps, ttft, _, decode_tps = (float(g) for g in match.groups())
    return {"prefill_tps": prefill_tps, "decode_tps": decode_tps, "ttft_ms": ttft,
            "tpot_ms": 1e3 / decode_tps if decode_tps else float("inf"), "prompt_tokens": prompt_tokens}


class NoiseLoad:
    """A background CPU and memory hog, one process per CPU in `cpus`, for as long as the
    `with` block runs: each spins on a 64 MiB array copy (memory) or a tight loop (cpu)."""

    HOG = ("import os, sys\n"
           "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
           "if sys.argv[2] == 'memory':\n"
           "    a = bytearray(64 << 20)\n"
           "    while True: b = bytes(a)\n"
           "while True: pass\n")

    def __init__(self, cpus, kind):
        self.cpus, self.kind, self.procs = cpus, kind, []

    def __enter__(self):
        kinds = ["cpu", "memory"] if self.kind == "both" else [self.kind]
        for i, cpu in enumerate(self.cpus):
            self.procs.append(subprocess.Popen([sys.executable, "-c", self.HOG, str(cpu), kinds[i % len(kinds)]]))
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()
