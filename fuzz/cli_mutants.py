#!/usr/bin/python3
"""Corrupted GGUF files through every cpullm command that reads a model, as a user runs them.

Each mutant (a seed model truncated, bit-flipped, with a hostile count, length, dimension,
offset or type, or structurally broken) goes to one command, run as a process with a timeout.
Every command must first accept every seed. Each outcome is one of:
  refused   exit 1 and one `cpullm: error:` line, the last on stderr
  accepted  exit 0
  unclean   exit 1 without that line, or with more than one
  silent    exit 0 on a file that must be refused (wrong magic or version, tensor data cut
            short, two tensors at one offset, a duplicate name)
  crashed   a signal or any other exit status
  hung      still running after --timeout seconds
Anything but refused and accepted is a failure: the exit status is 1 and the first failures
are listed with the saved mutant to reproduce them.

  cli_mutants.py --cpullm build/cpullm --workdir DIR --per-command 100   (CI)
  cli_mutants.py --cpullm build/cpullm --workdir DIR --mutants 100000   (scripts/fuzz)
"""
import argparse
import concurrent.futures
import os
import random
import shutil
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

# Bytes per GGUF value type; 0 for string (8) and array (9).
VALUE_SIZES = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8]
# Bytes per block and elements per block of the tensor types the seeds use.
TENSOR_TYPES = {0: (4, 1), 1: (2, 1), 8: (34, 32), 2: (18, 32), 30: (2, 1)}  # f32 f16 q8_0 q4_0 bf16

# Every command that reads a model, and how it is run: {model} is the mutant, {out} a scratch
# folder of the worker. Small lengths keep each run short on the tiny seeds; profile takes its
# roofs from a stored hardware profile rather than measuring them for seconds.
COMMANDS = {
    "info": ["info", "{model}"],
    "info --json": ["info", "--json", "{model}"],
    **{f"bench -o {fmt}": ["bench", "-m", "{model}", "-p", "4", "-n", "2", "-r", "1", "-t", "1", "-o", fmt]
       for fmt in ["md", "csv", "json", "jsonl", "sql"]},
    "profile --json": ["profile", "-m", "{model}", "-p", "4", "-n", "2", "-c", "16", "--no-counters", "--hardware", "e5-4627v4", "--json"],
    "quantize": ["quantize", "{model}", "{out}/quantized.gguf", "--type", "q8_0"],
    "eval-quant": ["eval-quant", "-m", "{model}", "--formats", "q8_0", "--window", "16", "--text", "{out}/text.txt"],
}
EVAL_TEXT = "Once upon a time there was a little girl. She liked to play in the park with her dog.\n" * 2


class Walker:
    """The fields of a valid GGUF file that mutations aim at, found independently of cpullm."""

    def __init__(self, data):
        self.data, self.pos = data, 8
        # Each (position, size, kind): numbers; keys, tensor names and string values; tensor offsets.
        self.fields, self.names, self.offsets = [], [], []
        n_tensors, n_kvs = self.read(8, "count"), self.read(8, "count")
        alignment = 32
        for _ in range(n_kvs):
            key = self.text("key")
            value_type = self.read(4, "type")
            if key == b"general.alignment":
                alignment = struct.unpack_from("<I", data, self.pos)[0]
            self.value(value_type)
        extents = []
        for _ in range(n_tensors):
            self.text("tensor")
            n_dims = self.read(4, "count")
            elements = 1
            for _ in range(n_dims):
                elements *= self.read(8, "dim")
            block_bytes, block_elements = TENSOR_TYPES[self.read(4, "type")]
            self.offsets.append((self.pos, 8))
            offset = self.read(8, "offset")
            extents.append((offset, elements // block_elements * block_bytes))
        self.info_end = self.pos
        self.data_start = (self.pos + alignment - 1) // alignment * alignment
        self.data_end = max((self.data_start + o + b for o, b in extents), default=self.data_start)

    def read(self, size, kind, record=True):
        value = int.from_bytes(self.data[self.pos:self.pos + size], "little")
        if record:
            self.fields.append((self.pos, size, kind))
        self.pos += size
        return value

    def text(self, kind):
        length = self.read(8, "length")
        self.names.append((self.pos, length, kind))
        self.pos += length
        return self.data[self.pos - length:self.pos]

    def value(self, value_type, record=True):
        if value_type == 8:
            length = self.read(8, "length", record)  # read first: it moves pos
            if record:
                self.names.append((self.pos, length, "string"))
            self.pos += length
        elif value_type == 9:
            element, count = self.read(4, "type", record), self.read(8, "count", record)
            if VALUE_SIZES[element]:
                self.pos += count * VALUE_SIZES[element]
            else:  # a long array of strings (the vocabulary): only a few elements are aimed at
                for i in range(count):
                    self.value(element, record=count <= 10 or i % max(1, count // 8) == 0)
        else:
            self.read(VALUE_SIZES[value_type], "value", record)


def mutate(seed, walker, rng):
    """A mutant of `seed`: (bytes, what was done, whether cpullm must refuse it)."""
    data = bytearray(seed)
    family = rng.choice(["truncate", "flip header", "flip data", "hostile field", "bad text", "structure"])
    if family == "truncate":
        cut = rng.randrange(len(data))
        return bytes(data[:cut]), f"cut at {cut}", cut < walker.data_end
    if family in ("flip header", "flip data"):
        low, high = (0, walker.info_end) if family == "flip header" else (walker.data_start, len(data))
        flips = [(rng.randrange(low, high), rng.randrange(8)) for _ in range(rng.randint(1, 4))]
        for pos, bit in flips:
            data[pos] ^= 1 << bit
        return bytes(data), "bits flipped " + " ".join(f"{p}.{b}" for p, b in flips), False
    if family == "hostile field":
        pos, size, kind = rng.choice(walker.fields)
        current = int.from_bytes(data[pos:pos + size], "little")
        value = rng.choice([0, 1, 0xFFFFFFFF, 2**64 - 1, 2**62, 2**63 - 1, len(data), len(data) + 1,
                            current + 1, current - 1, 13, 31, 1000]) % (1 << (8 * size))
        data[pos:pos + size] = value.to_bytes(size, "little")
        return bytes(data), f"{kind} at {pos} set to {value}", False
    if family == "bad text":  # bytes that are not UTF-8, a terminal escape, a NUL: text must stay text
        pos, size, kind = rng.choice([n for n in walker.names if n[1] > 0])
        at = pos + rng.randrange(size)
        data[at] = rng.choice([0xFF, 0xC3, 0x80, 0xED, 0x1B, 0x00])
        return bytes(data), f"byte {at} of a {kind} set to {data[at]:#x}", False
    choice = rng.randrange(4)
    if choice == 0:
        data[0:4] = rng.choice([b"FUGG", b"\0\0\0\0", b"ggjt"])
        return bytes(data), "wrong magic", True
    if choice == 1:
        version = rng.choice([0, 1, 4, 0x03000000])
        data[4:8] = version.to_bytes(4, "little")
        return bytes(data), f"version {version:#x}", True
    if choice == 2 and len(walker.offsets) > 1:
        (a, _), (b, _) = rng.sample(walker.offsets, 2)
        if data[a:a + 8] != data[b:b + 8]:
            data[b:b + 8] = data[a:a + 8]
            return bytes(data), f"offset at {a} copied to {b}", True
    same = [(p, s) for p, s, k in walker.names if k == "tensor"]
    a = rng.choice(same)
    partners = [(p, s) for p, s in same if s == a[1] and data[p:p + s] != data[a[0]:a[0] + s]]
    if partners:
        b = rng.choice(partners)
        data[b[0]:b[0] + b[1]] = data[a[0]:a[0] + a[1]]
        return bytes(data), f"tensor name at {a[0]} copied onto {b[0]}", True
    return bytes(data) + bytes(rng.randrange(1, 4096)), "bytes appended", False


def classify(returncode, stderr, must_refuse, hung):
    if hung:
        return "hung"
    if returncode == 0:
        return "silent" if must_refuse else "accepted"
    if returncode != 1:
        return "crashed"
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("cpullm: error:")]
    return "refused" if len(errors) == 1 and lines[-1] == errors[0] else "unclean"


def run_one(cpullm, command, mutant, scratch, timeout):
    """Runs one command on one mutant; returns (outcome, stderr tail)."""
    data, what, must_refuse = mutant
    model = scratch / "mutant.gguf"
    model.write_bytes(data)
    args = [a.format(model=model, out=scratch) for a in COMMANDS[command]]
    env = dict(os.environ, OMP_NUM_THREADS="1", ASAN_OPTIONS="detect_leaks=0")
    try:
        proc = subprocess.run([cpullm, *args], capture_output=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL)
        stderr = proc.stderr.decode(errors="replace")
        return classify(proc.returncode, stderr, must_refuse, False), f"exit {proc.returncode}: {stderr[-400:]}"
    except subprocess.TimeoutExpired:
        return "hung", f"still running after {timeout} s"


def make_seeds(cpullm, workdir, shared):
    """The seed models: a tiny synthetic one (written by gen-model), and stories260K where present."""
    seeds = []
    tiny = workdir / "seed-tiny.gguf"
    subprocess.run([cpullm, "gen-model", "--shape", "custom", "--layers", "2", "--dim", "32", "--ffn", "64",
                    "--heads", "4", "--kv-heads", "2", "--vocab", "400", "--ctx", "64", "-o", tiny],
                   check=True, capture_output=True)
    seeds.append(tiny)
    for name in ["stories260K.gguf", "stories260K-q8_0.gguf"]:
        if shared and (Path(shared) / name).exists():
            seeds.append(Path(shared) / name)
        else:
            print(f"cli_mutants: {name} is not in the shared models: one seed fewer")
    return [(path.name, path.read_bytes()) for path in seeds]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpullm", required=True)
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--shared", default=os.environ.get("CPULLM_SHARED_MODELS"))
    size = parser.add_mutually_exclusive_group(required=True)
    size.add_argument("--per-command", type=int, help="mutants for each command")
    size.add_argument("--mutants", type=int, help="mutants in all, spread over the commands")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds before a run counts as hung")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    seeds = make_seeds(args.cpullm, args.workdir, args.shared)
    walkers = [Walker(data) for _, data in seeds]
    # Every command must accept every pristine seed, or its mutants would prove nothing.
    pristine = args.workdir / "pristine"
    pristine.mkdir()
    (pristine / "text.txt").write_text(EVAL_TEXT)
    for name, data in seeds:
        for command in COMMANDS:
            outcome, detail = run_one(args.cpullm, command, (data, "pristine", False), pristine, args.timeout)
            if outcome != "accepted":
                print(f"cli_mutants: cpullm {command} does not accept the seed {name}: {detail}")
                return 1
    total = args.mutants if args.mutants is not None else args.per_command * len(COMMANDS)
    commands = list(COMMANDS)

    def job(i):
        rng = random.Random(args.seed * 1_000_003 + i)
        s = i % len(seeds)
        command = commands[(i // len(seeds)) % len(commands)]
        mutant = mutate(seeds[s][1], walkers[s], rng)
        scratch = args.workdir / f"worker-{threading.get_ident()}"
        if not scratch.exists():
            scratch.mkdir()
            (scratch / "text.txt").write_text(EVAL_TEXT)
        outcome, detail = run_one(args.cpullm, command, mutant, scratch, args.timeout)
        if outcome in ("refused", "accepted"):
            mutant = (None, *mutant[1:])  # only a failure's bytes are kept, to be saved
        return i, command, seeds[s][0], mutant, outcome, detail

    counts = {c: dict.fromkeys(["refused", "accepted", "unclean", "silent", "crashed", "hung"], 0) for c in commands}
    failures = []
    start = time.monotonic()
    # Each thread runs its commands in a folder of its own.
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for i, command, seed_name, mutant, outcome, detail in pool.map(job, range(total)):
            counts[command][outcome] += 1
            if outcome not in ("refused", "accepted"):
                if len(failures) < 20:
                    saved = args.workdir / "failures" / f"{i}.gguf"
                    saved.parent.mkdir(exist_ok=True)
                    saved.write_bytes(mutant[0])
                    failures.append(f"{outcome}: cpullm {command} on {seed_name} {mutant[1]} (saved as {saved}): {detail}")
                else:
                    failures.append(None)
    seconds = time.monotonic() - start

    print(f"{'command':<16} {'tried':>7} {'refused':>8} {'accepted':>9} {'unclean':>8} {'silent':>7} {'crashed':>8} {'hung':>5}")
    totals = dict.fromkeys(counts[commands[0]], 0)
    for command in commands:
        c = counts[command]
        for k in totals:
            totals[k] += c[k]
        print(f"{command:<16} {sum(c.values()):>7} {c['refused']:>8} {c['accepted']:>9} {c['unclean']:>8} "
              f"{c['silent']:>7} {c['crashed']:>8} {c['hung']:>5}")
    t = totals
    print(f"{'all':<16} {total:>7} {t['refused']:>8} {t['accepted']:>9} {t['unclean']:>8} {t['silent']:>7} "
          f"{t['crashed']:>8} {t['hung']:>5}")
    print(f"cli_mutants: {total} runs in {seconds:.0f} s ({total / seconds:.1f} per second, {args.jobs} at a time)")
    for line in filter(None, failures):
        print(line)
    if len(failures) > 20:
        print(f"... and {len(failures) - 20} more failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
