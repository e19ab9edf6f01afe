#!/usr/bin/python3
"""End-to-end checks of `cpullm tune` and `cpullm sweep` through the cpullm binary.

- `tune --hardware e5-4627v4` on this machine takes the "other box" path: it says so on its first
  line, prints the plan, the kernel command line and sysctl settings, and predictions labelled
  as such, for a LLaMA-7B-shaped Q8_0 file of 7 GB that is a sparse file here (header only: it is
  planned for, never loaded);
- the new profiles are read, and a malformed profile is an error naming the field;
- a tiny real sweep over stories260K (threads x format), its table and TOML configs, the config
  read back by `cpullm bench --config`, and `--resume` repeating nothing.

Usage: test_tuning_cli.py --cpullm BIN --shared DIR --workdir DIR
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

from cli_checks import check, expect_error, run, run_checks

PROFILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tuning", "profiles")


def gguf_string(text):
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_sparse_llama7b_q8_0(path):
    """A GGUF file with LLaMA-7B's header (Q8_0 matrices, F32 norms) whose 7 GB of tensor data
    is a hole: the header is all `info`, `topo -m` and `tune` read."""
    dim, ffn, vocab, layers = 4096, 11008, 32000, 32
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
           "llama.attention.head_count": 32, "llama.attention.head_count_kv": 32, "llama.context_length": 4096,
           "llama.rope.dimension_count": 128, "llama.vocab_size": vocab}
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(u32) + 1)
    header += gguf_string("general.architecture") + struct.pack("<I", 8) + gguf_string("llama")
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


@check
def tune_other_box_plans_and_predicts(ctx):
    model = os.path.join(ctx.workdir, "llama7b-q8_0-sparse.gguf")
    size = write_sparse_llama7b_q8_0(model)
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


@check
def new_profiles_read(ctx):
    for name, packages, cores in [("xeon-8380", 2, 80), ("epyc-9355p", 1, 32), ("xeon-6980p", 2, 256)]:
        data = json.loads(run([ctx.cpullm, "topo", "--hardware", name, "--json"]).stdout)
        assert data["topology"]["packages"] == packages and len(data["topology"]["cores"]) == cores, name
        assert data["profile"]["memory_bandwidth_gbs_per_package"]["source"], name


@check
def malformed_profile_names_the_field(ctx):
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


@check
def tiny_sweep_end_to_end(ctx):
    model = os.path.join(ctx.shared, "stories260K.gguf")
    if not os.path.exists(model):
        return f"skip: {model} is absent"
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
    again = run(cmd + ["--resume"], timeout=600)
    assert " measured, " not in again.stderr and again.stderr.count(" resumed, ") == 4, again.stderr
    expect_error(cmd, "--resume")  # the same folder without --resume is refused


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpullm", required=True)
    parser.add_argument("--shared", required=True)
    parser.add_argument("--workdir", required=True)
    ctx = parser.parse_args()
    ctx.cpullm = os.path.abspath(ctx.cpullm)
    os.environ["CPULLM_BIN"] = ctx.cpullm  # the Python subcommands find the binary under test through it
    os.makedirs(ctx.workdir, exist_ok=True)
    sys.exit(run_checks(ctx))


if __name__ == "__main__":
    main()
