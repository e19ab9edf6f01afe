"""End-to-end checks of the cpullm command line.

Every subcommand's --help; `info` as text and JSON; `generate` on stories260K reproducing the
known text through the CLI; seeded sampling; `gen-model` streaming with flat peak memory;
`quantize` (types and --keep through the CLI, stories260K in F16 still telling its story,
streaming with flat peak memory); and bad input of every kind ending in one clear error line
and exit status 1, never a crash.
"""
import json
import math
import os
import re
import struct
import subprocess

import pytest

from cli_checks import expect_error, run, write_tiny_model
from gguf_reader import DECODED_TYPES, GGML_TYPES, GGUFFile, row_bytes  # the independent reader, written from the GGUF spec


def known_good_story(shared):
    readme = open(os.path.join(shared, "README.md"), encoding="utf-8").read()
    section = readme[readme.index("## Known-good output"):]
    return section.split("```\n", 1)[1].split("\n```", 1)[0]


def test_help_for_every_subcommand(ctx):
    for command, flags in [("generate", ["--prompt", "--temp", "--top-k", "--top-p", "--seed", "--threads", "--ctx-size",
                                         "--special"]),
                           ("logits", ["--output"]), ("info", ["--json"]),
                           ("tokenize", ["--model", "--prompt", "--file", "--no-bos", "--special"]),
                           ("gen-model", ["--shape", "--layers", "--kv-heads", "--dtype", "--tied-output"]),
                           ("quantize", ["--type", "--keep", "q8_0", "q4_0", "bf16", "f16", "first", "last",
                                         "embeddings", "output"])]:
        out = run([ctx.cpullm, command, "--help"]).stdout
        for flag in flags:
            assert flag in out, f"{command} --help lacks {flag}"
    top = run([ctx.cpullm, "--help"]).stdout
    assert "gen-model" in top and "quantize" in top and "tokenize" in top


def test_small_synthetic_model(ctx):
    run([ctx.cpullm, "gen-model", "--shape", "custom", "--layers", "2", "--dim", "64", "--ffn", "128", "--heads", "4",
         "--kv-heads", "2", "--vocab", "1000", "--ctx", "64", "--dtype", "bf16", "-o", ctx.small])


def test_info_text_and_json(ctx):
    text = run([ctx.cpullm, "info", ctx.small]).stdout
    assert "GGUF v3" in text and "blk.1.ffn_down.weight" in text and "BF16" in text, text[:500]
    data = json.loads(run([ctx.cpullm, "info", ctx.small, "--json"]).stdout)
    assert data["metadata"]["llama.block_count"]["value"] == 2
    assert data["metadata"]["tokenizer.ggml.tokens"]["value"][1] == "<s>"
    names = [t["name"] for t in data["tensors"]]
    assert len(names) == 2 + 2 * 9 + 1 and "output.weight" in names, names
    down = next(t for t in data["tensors"] if t["name"] == "blk.0.ffn_down.weight")
    assert down["shape"] == [128, 64] and down["bytes"] == 128 * 64 * 2, down
    assert data["totals"]["bytes"] == sum(t["bytes"] for t in data["tensors"])


def test_generate_prints_text_and_timing(ctx):
    proc = run([ctx.cpullm, "generate", "-m", ctx.small, "-p", "once upon a time", "-n", "12", "--ignore-eos", "-t", "2"])
    assert proc.stdout.startswith("once upon a time"), proc.stdout
    summary = proc.stderr.strip().splitlines()[-1]
    for pattern in [r"prompt 5 tokens, [\d.]+ tokens/s", r"time to first token [\d.]+ ms",
                    r"generated 12 tokens, [\d.]+ tokens/s", r"2 threads"]:
        assert re.search(pattern, summary), f"{pattern!r} not in {summary!r}"


def test_generate_stops_at_a_turn_ending_token(ctx):
    """A model whose logits are all zero picks token 0 at temperature 0. Its piece, renamed from
    <unk> to <EOT>, ends a turn by its text alone (the file's EOS stays 2): generate stops there,
    and with --ignore-eos goes on."""
    model = os.path.join(ctx.workdir, "eot.gguf")
    write_tiny_model(ctx.cpullm, model)
    g = GGUFFile(model)
    ne, _, offset = g.tensors["output_norm.weight"]
    data = bytearray(g.buf)
    data[offset:offset + 4 * ne[0]] = bytes(4 * ne[0])  # F32 zeros: every logit is 0
    at = data.index(struct.pack("<Q", 5) + b"<unk>")
    data[at + 8:at + 13] = b"<EOT>"
    open(model, "wb").write(bytes(data))
    args = [ctx.cpullm, "generate", "-m", model, "-p", "once", "-n", "8", "--temp", "0"]
    assert "generated 0 tokens" in run(args).stderr.strip().splitlines()[-1]
    assert "generated 8 tokens" in run(args + ["--ignore-eos"]).stderr.strip().splitlines()[-1]


def test_stories_greedy_text_through_the_cli(ctx):
    if not ctx.stories:
        pytest.skip("stories260K.gguf not found")
    out = run([ctx.cpullm, "generate", "-m", ctx.stories, "--temp", "0", "-n", "200"]).stdout
    assert out == known_good_story(ctx.shared) + "\n", out


def test_parallel_sequences_batched(ctx):
    # Three copies of the prompt prefilled and decoded together: greedy gives each the text of
    # one sequence alone; sampling gives each its own seed's text. Half-precision caches run too.
    base = [ctx.cpullm, "generate", "-m", ctx.small, "-p", "once upon a time", "-n", "10", "--ignore-eos", "-t", "2"]
    alone = run(base + ["--temp", "0"]).stdout.strip()
    together = run(base + ["--temp", "0", "--parallel", "3", "--kv-type", "f16", "--prefetch"])
    texts = re.split(r"--- sequence \d ---\n", together.stdout)[1:]
    assert [t.strip() for t in texts] == [alone] * 3, together.stdout
    assert "3 sequences" in together.stderr.splitlines()[-1] and "memory plan: weights" in together.stderr
    sampled = run(base + ["--temp", "1", "-np", "2"]).stdout  # llama.cpp's spelling of --parallel
    assert len(set(re.split(r"--- sequence \d ---\n", sampled)[1:])) == 2, sampled
    expect_error(base + ["--kv-type", "q4"], "KV cache type 'q4' is not one of f32, f16, bf16")


def test_seeded_sampling_is_reproducible(ctx):
    if not ctx.stories:
        pytest.skip("stories260K.gguf not found")
    def sample(seed):
        return run([ctx.cpullm, "generate", "-m", ctx.stories, "--temp", "1", "--seed", str(seed), "-n", "40"]).stdout
    assert sample(5) == sample(5)
    assert sample(5) != sample(6)


def test_llama_cpp_quantized_files_run_at_every_isa(ctx):
    """llama.cpp's Q8_0 file runs greedy at each kernel level; the level shows in the timing line."""
    if not ctx.shared_q8:
        pytest.skip("stories260K-q8_0.gguf not found")
    for isa in ("scalar", "avx2", "avx512"):
        proc = run([ctx.cpullm, "generate", "-m", ctx.shared_q8, "--temp", "0", "-n", "30", "--isa", isa],
                   expect_ok=False)
        if proc.returncode == 1 and "cannot run the" in proc.stderr:
            continue  # this CPU lacks the level: a clear error, checked here too
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("Once upon a time, there was a little girl named Lily."), proc.stdout
        assert f"kernels {isa}" in proc.stderr.strip().splitlines()[-1], proc.stderr


def test_eval_quant_scores_formats(ctx):
    proc = run([ctx.cpullm, "eval-quant", "-m", ctx.small, "--formats", "q8_0,q4_0", "--window", "64", "--json"])
    results = json.loads(proc.stdout)
    assert [r["format"] for r in results] == ["source", "q8_0", "q4_0"], results
    assert results[0]["mean_kl"] == 0 and results[0]["top1_agreement"] == 1
    assert 0 < results[1]["mean_kl"] < results[2]["mean_kl"], results
    text = os.path.join(ctx.workdir, "short.txt")
    open(text, "w").write("the ball")
    table = run([ctx.cpullm, "eval-quant", "-m", ctx.small, "--formats", "int8-channel", "--text", text]).stdout
    assert "int8-channel" in table and "perplexity" in table, table
    expect_error([ctx.cpullm, "eval-quant", "-m", ctx.small, "--formats", "q8_0", "--text", text + ".missing"],
                 "cannot open the evaluation text")


def test_generate_binds_threads(ctx):
    """The plan is applied: the OS's own account of each thread's CPUs is printed."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs two CPUs")
    def bound(*flags):
        proc = run([ctx.cpullm, "generate", "-m", ctx.small, "-n", "2", *flags])
        return next(line for line in proc.stderr.splitlines() if line.startswith("cpullm: threads (bind"))
    assert bound("--bind", "compact", "-t", "2").endswith("thread 0 on CPU 0, thread 1 on CPU 1")
    assert bound("--bind", "compact", "-t", "1", "--cpuset", "1").endswith("thread 0 on CPU 1")
    assert "thread 0 on CPU 1" in bound("--cpuset", "1")
    expect_error([ctx.cpullm, "generate", "-m", ctx.small, "--cpuset", "4096"], "CPU 4096 does not exist")
    expect_error([ctx.cpullm, "generate", "-m", ctx.small, "--bind", "compact", "-t", str(os.cpu_count() + 1)],
                 "usable core")


def test_logits_writes_npy(ctx):
    out = os.path.join(ctx.workdir, "l.npy")
    proc = run([ctx.cpullm, "logits", "-m", ctx.small, "-p", "the ball", "-o", out])
    ids = [int(t) for t in proc.stdout.split(":", 1)[1].split()]
    assert ids[0] == 1 and len(ids) == 3, ids
    raw = open(out, "rb").read()
    assert raw.startswith(b"\x93NUMPY") and b"'shape': (3, 1000, )" in raw
    assert len(raw) - (10 + int.from_bytes(raw[8:10], "little")) == 3 * 1000 * 4


def test_logits_same_with_a_thread_team_regions_or_one_thread(ctx):
    """A forward pass runs as one thread team; OMP_WAIT_POLICY=passive makes every parallel op an
    OpenMP region instead (engine/kernels/parallel.hpp). Every output is one thread's sum either
    way: the prompt's logits are the same bytes, and the same as one thread's."""
    results = []
    for threads, policy in (("2", None), ("2", "passive"), ("1", None)):
        out = os.path.join(ctx.workdir, f"team-{threads}-{policy}.npy")
        env = dict(os.environ)
        env.pop("OMP_WAIT_POLICY", None)
        if policy:
            env["OMP_WAIT_POLICY"] = policy
        proc = subprocess.run([ctx.cpullm, "logits", "-m", ctx.small, "-p", "the ball went up", "-t", threads, "-o", out],
                              capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        results.append(open(out, "rb").read())
    assert results[0] == results[1] == results[2], "logits differ between a team, regions and one thread"


def test_gen_model_memory_does_not_grow_with_layers(ctx):
    """Streaming: writing three layers of LLaMA-7B width peaks no higher than writing one."""
    peaks = []
    for layers in ("1", "3"):
        path = os.path.join(ctx.workdir, "wide.gguf")
        proc = run([ctx.cpullm, "gen-model", "--shape", "llama-7b", "--layers", layers, "--vocab", "1000", "-o", path])
        assert "gen-model wide.gguf [" in proc.stderr, "no progress bar"
        peaks.append(float(re.search(r"peak resident ([\d.]+) MiB", proc.stderr).group(1)))
        size = os.path.getsize(path)
        os.remove(path)
    assert size > 1000 * 2**20, size  # three layers at 7B width: over a gigabyte written
    assert peaks[1] < peaks[0] + 16 and peaks[1] < 64, peaks
    print(f"peak resident MiB for 1 and 3 layers: {peaks}")


def test_quantize_types_and_keep(ctx):
    """The small BF16 model to Q4_0, keeping block 0 and every ffn_up: the types `info` then lists."""
    out = os.path.join(ctx.workdir, "small-q4_0.gguf")
    proc = run([ctx.cpullm, "quantize", ctx.small, out, "--type", "q4_0", "--keep", "first,blk.*.ffn_up.weight"])
    assert "quantize small-q4_0.gguf [" in proc.stderr, "no progress bar"
    summary = proc.stderr.strip().splitlines()[-1]
    assert re.search(r"wrote .*small-q4_0.gguf \(q4_0\): 7 tensors converted, 1 fell back, 10 kept, 3 unchanged; "
                     r"[\d.]+ MiB -> [\d.]+ MiB; peak resident [\d.]+ MiB", summary), summary
    data = json.loads(run([ctx.cpullm, "info", out, "--json"]).stdout)
    types = {t["name"]: t["type"] for t in data["tensors"]}
    for name, expected in types.items():
        if name.startswith("blk.0.") or name.endswith("ffn_up.weight"):
            want = "F32" if name.endswith("norm.weight") else "BF16"
        elif name.endswith("norm.weight"):
            want = "F32"
        else:
            want = "Q8_0" if name == "output.weight" else "Q4_0"  # llama.cpp's output rule
        assert expected == want, (name, expected, want)
    assert data["metadata"]["general.file_type"]["value"] == 2
    assert data["metadata"]["general.quantization_version"]["value"] == 2
    assert data["metadata"]["tokenizer.ggml.tokens"]["value"][1] == "<s>"


def test_quantize_r8_is_the_plain_format_interleaved(ctx):
    """q4_0-r8 and q8_0-r8 write Q4_0's and Q8_0's values with rows interleaved in groups of 8:
    matrices of whole groups become CPULLM_Q4_0_R8 / CPULLM_Q8_0_R8 (the output layer Q8_0, as
    under q4_0, interleaved too), and the model computes what the plain file computes: the same
    logits bit for bit with the scalar kernels (same sums in the same order), the same greedy
    tokens with the SIMD ones (their sums run in another order)."""
    for plain_name, r8_name, r8_type, converted in (("q4_0", "q4_0-r8", "CPULLM_Q4_0_R8", "15 tensors converted, 1 fell back"),
                                                    ("q8_0", "q8_0-r8", "CPULLM_Q8_0_R8", "16 tensors converted, 0 fell back")):
        plain, interleaved = (os.path.join(ctx.workdir, f"small-{t}.gguf") for t in (plain_name, r8_name))
        run([ctx.cpullm, "quantize", ctx.small, plain, "--type", plain_name])
        summary = run([ctx.cpullm, "quantize", ctx.small, interleaved, "--type", r8_name]).stderr.strip().splitlines()[-1]
        assert f"({r8_name}): {converted}" in summary, summary
        tensors = [json.loads(run([ctx.cpullm, "info", path, "--json"]).stdout)["tensors"] for path in (plain, interleaved)]
        types = {t["name"]: t["type"] for t in tensors[1]}
        assert types["output.weight"] == "CPULLM_Q8_0_R8" and types["blk.1.attn_k.weight"] == r8_type, types
        assert [t["bytes"] for t in tensors[0]] == [t["bytes"] for t in tensors[1]], "interleaving changed a size"
        logits = []
        for path in (plain, interleaved):
            out = path + ".npy"
            run([ctx.cpullm, "logits", "-m", path, "-p", "once upon a time", "--isa", "scalar", "-o", out])
            logits.append(open(out, "rb").read())
        assert logits[0] == logits[1], (r8_name, "scalar logits differ")
        for isa in ("avx2", "avx512"):
            texts = [run([ctx.cpullm, "generate", "-m", path, "-p", "once upon a time", "-n", "20", "--ignore-eos",
                          "--temp", "0", "--isa", isa], expect_ok=False) for path in (plain, interleaved)]
            if texts[0].returncode == 1 and "cannot run the" in texts[0].stderr:
                continue
            assert texts[0].stdout == texts[1].stdout, (r8_name, isa, texts[0].stdout, texts[1].stdout)
            assert f"kernels {isa}" in texts[1].stderr.strip().splitlines()[-1], texts[1].stderr
        if ctx.stories:  # stories260K's ffn_gate and ffn_up have 172 rows: not whole groups, left plain
            out = os.path.join(ctx.workdir, f"stories-{r8_name}.gguf")
            run([ctx.cpullm, "quantize", ctx.stories, out, "--type", r8_name])
            types = {t["name"]: t["type"] for t in json.loads(run([ctx.cpullm, "info", out, "--json"]).stdout)["tensors"]}
            assert types["blk.0.ffn_up.weight"] == plain_name.upper() and types["blk.0.attn_q.weight"] == r8_type, types
            text = run([ctx.cpullm, "generate", "-m", out, "--temp", "0", "-n", "30"]).stdout
            assert text.startswith("Once upon a time"), text


# ggml's type count as llama.cpp's gguf.cpp knows it (ggml.h, 2025: MXFP4 = 39 is the last).
GGML_TYPE_COUNT = 40


def ggml_reader_verdict(g):
    """What a ggml-based reader does with a GGUFFile's tensor infos: llama.cpp's gguf_init refuses
    a tensor whose type is outside [0, GGML_TYPE_COUNT) ("has invalid ggml type") before reading
    any data; a type inside must have ggml's layout, so its size must be ggml's."""
    for name, (ne, gtype, start) in g.tensors.items():
        if not 0 <= gtype < GGML_TYPE_COUNT:
            return f"refused: tensor '{name}' has invalid ggml type {gtype}"
        assert gtype in GGML_TYPES and start + math.prod(ne[1:]) * row_bytes(gtype, ne[0]) <= len(g.buf), (name, ne, gtype)
    return "accepted"


def test_cpullm_types_are_refused_by_ggml_readers(ctx):
    """cpullm's own layouts (per-channel INT8, rows interleaved in eights, Top-K sparse) carry type
    numbers far outside ggml's range, so llama.cpp-style readers refuse such a file cleanly instead
    of misreading it (Q4_0_R8 has Q4_0's size: under Q4_0's number it would load as garbage), and
    the independent reader names the tensor and its type where it has no decoder for it (the
    interleaved and sparse layouts); files of ggml's types pass."""
    # custom: cpullm's type numbers the file must hold (None: sparse ones; empty: ggml's types only)
    for flags, custom in ((["--type", "int8-channel"], {4097}), (["--type", "q4_0-r8"], {4098, 4099}),
                          (["--type", "q8_0-r8"], {4099}), (["--type", "f16", "--sparsity-pattern", "2:4"], None),
                          (["--type", "q4_0"], set()), (["--type", "q8_0"], set())):
        out = os.path.join(ctx.workdir, "small-" + "-".join(f.strip("-").replace(":", "of") for f in flags) + ".gguf")
        run([ctx.cpullm, "quantize", ctx.small, out] + flags)
        g = GGUFFile(out)
        mine = {gtype for _, gtype, _ in g.tensors.values()} - set(GGML_TYPES)
        verdict = ggml_reader_verdict(g)
        if custom == set():
            assert verdict == "accepted" and not mine, (flags, verdict, mine)
            continue
        assert verdict.startswith("refused: tensor '"), (flags, verdict)
        assert mine == custom if custom else mine and all(t >> 24 == 0x53 for t in mine), (flags, mine)
        undecoded = [(n, t) for n, (_, t, _) in g.tensors.items() if t in mine and t not in DECODED_TYPES]
        for name, gtype in undecoded[:1]:  # the interleaved and sparse layouts: the reader has no decoder
            try:
                g.tensor(name)
                raise AssertionError(f"{flags}: the independent reader decoded {name}")
            except NotImplementedError as e:
                assert f"tensor {name}: ggml type {gtype} not supported" in str(e), e


def test_quantized_stories_f16_tells_the_same_first_sentence(ctx):
    """F16 weights are not the F32 ones, so only the first sentence must survive for sure."""
    if not ctx.stories:
        pytest.skip("stories260K.gguf not found")
    out = os.path.join(ctx.workdir, "stories-f16.gguf")
    run([ctx.cpullm, "quantize", ctx.stories, out, "--type", "f16"])
    text = run([ctx.cpullm, "generate", "-m", out, "--temp", "0", "-n", "200"]).stdout
    first = "Once upon a time, there was a little girl named Lily."
    assert text.startswith(first), text
    print("all 200 tokens as in F32" if text == known_good_story(ctx.shared) + "\n" else "first sentence as in F32")


def test_quantize_memory_stays_flat(ctx):
    """Streaming: quantizing three layers at LLaMA-7B width (1.2 GB) peaks at a few MiB."""
    source = os.path.join(ctx.workdir, "wide-f16.gguf")
    out = os.path.join(ctx.workdir, "wide-q8_0.gguf")
    run([ctx.cpullm, "gen-model", "--shape", "llama-7b", "--layers", "3", "--vocab", "1000", "--dtype", "f16",
         "-o", source])
    try:
        proc = run([ctx.cpullm, "quantize", source, out, "--type", "q8_0"])
        size = os.path.getsize(source)
        assert os.path.getsize(out) * 1.8 < size, (os.path.getsize(out), size)
    finally:
        for path in (source, out):
            if os.path.exists(path):
                os.remove(path)
    assert "quantize wide-q8_0.gguf [" in proc.stderr, "no progress bar"
    peak = float(re.search(r"peak resident ([\d.]+) MiB", proc.stderr).group(1))
    assert size > 1000 * 2**20, size
    assert peak < 64, f"peak resident {peak} MiB quantizing a {size / 2**20:.0f} MiB file"
    print(f"peak resident {peak} MiB for a {size / 2**20:.0f} MiB input")


def test_bad_input_is_one_clear_error(ctx):
    missing = os.path.join(ctx.workdir, "missing.gguf")
    proc = run([ctx.cpullm, "info", missing], expect_ok=False)
    assert proc.returncode != 0 and "missing.gguf" in proc.stderr, proc.stderr
    not_gguf = os.path.join(ctx.workdir, "not.gguf")
    open(not_gguf, "wb").write(b"hello, this is not a model at all")
    expect_error([ctx.cpullm, "info", not_gguf], not_gguf, "bad magic")
    truncated = os.path.join(ctx.workdir, "truncated.gguf")
    open(truncated, "wb").write(open(ctx.small, "rb").read()[:5000])
    expect_error([ctx.cpullm, "info", truncated], truncated, "truncated")
    expect_error([ctx.cpullm, "generate", "-m", truncated], truncated)
    expect_error([ctx.cpullm, "generate", "-m", ctx.small, "-c", "8", "-n", "20"], "exceeds the context")
    expect_error([ctx.cpullm, "gen-model", "--shape", "custom", "--dim", "64", "-o", os.path.join(ctx.workdir, "x")],
                 "--shape custom needs")
    expect_error([ctx.cpullm, "gen-model", "--shape", "custom", "--layers", "1", "--dim", "30", "--ffn", "8",
                  "--heads", "4", "--vocab", "400", "-o", os.path.join(ctx.workdir, "x")], "heads of even size")
    out = os.path.join(ctx.workdir, "q.gguf")
    expect_error([ctx.cpullm, "quantize", ctx.small, out, "--type", "q7_k"], "unknown --type 'q7_k'")
    expect_error([ctx.cpullm, "quantize", missing, out, "--type", "q8_0"], missing)
    expect_error([ctx.cpullm, "quantize", ctx.small, out, "--type", "q8_0", "--keep", "first,blk.*.fnn_up.weight"],
                 ctx.small, "--keep 'blk.*.fnn_up.weight' matches no tensor")
    expect_error([ctx.cpullm, "quantize", ctx.small, ctx.small, "--type", "q8_0"], "is the input file")
    assert not os.path.exists(out)
    # Flag errors: CLI11's message, naming the flag, as the one error line.
    for args, fragment in [(["generate", "-m", ctx.small, "--temp", "-1"], "--temp"),
                           (["generate", "-m", ctx.small, "--top-p", "2"], "--top-p"),
                           (["generate", "-m", ctx.small, "--bogus"], "--bogus"),
                           (["gen-model", "--shape", "gpt-9", "-o", "x"], "--shape"),
                           (["quantize", ctx.small, "x.gguf"], "--type"),
                           (["generate"], "--model")]:
        expect_error([ctx.cpullm] + args, fragment)
    expect_error([ctx.cpullm, "generate", "-m", ctx.small, "--isa", "avx1024"], "unknown ISA 'avx1024'")


@pytest.fixture(scope="module")
def ctx(ctx):
    ctx.small = os.path.join(ctx.workdir, "small.gguf")
    found = lambda name: os.path.join(ctx.shared, name) if os.path.isfile(os.path.join(ctx.shared, name)) else None
    ctx.stories, ctx.shared_q8 = found("stories260K.gguf"), found("stories260K-q8_0.gguf")
    return ctx
