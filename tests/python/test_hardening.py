"""The command line against a hostile user and a careless one (issue 32's findings).

- Outputs cannot be redirected: eval-quant's temporary folder is fresh (mkdtemp), and a symlink
  planted where gen-model, quantize, logits or a bench workload write is replaced, its target
  untouched.
- Text that is not UTF-8 (in metadata, a tensor name, a token piece, the model's path) gives
  valid JSON from info --json, bench -o json|jsonl, profile --json and bench --db (whose run
  finishes), and `info` prints control characters escaped.
- Inputs that used to hang are refused at once: a FIFO as the model, a sparse 4 TiB model, a
  synthetic topology of millions of PUs.
- Values that make no sense are refused: block_count below the blocks present, an infinite
  rope.freq_base, weights that make the logits NaN.
- A table of well over 100 bad invocations across every command: each ends in exactly one
  'cpullm: error:' line on stderr, its last, and exit status 1, never a traceback or CLI11's own
  text.
"""
import json
import math
import os
import sqlite3
import struct
import subprocess

import pytest

from cli_checks import expect_error, run, write_tiny_model
from gguf_reader import GGUFFile  # the independent reader, written from the GGUF spec

VICTIM_TEXT = b"the victim's own bytes\n"


def patched(source, target, replacements):
    """A copy of source with each (old, new) byte string replaced, same length, first match only."""
    buf = bytearray(open(source, "rb").read())
    for old, new in replacements:
        assert len(old) == len(new), (old, new)
        at = buf.index(old)
        buf[at:at + len(old)] = new
    open(target, "wb").write(bytes(buf))
    return target


def u32_value(key, value):
    """A GGUF key/value pair's bytes for a u32."""
    return struct.pack("<Q", len(key)) + key.encode() + struct.pack("<II", 4, value)


def f32_value(key, value):
    return struct.pack("<Q", len(key)) + key.encode() + struct.pack("<If", 6, value)


def victim(ctx, name):
    path = os.path.join(ctx.workdir, name)
    open(path, "wb").write(VICTIM_TEXT)
    return path


def plant_link(ctx, output, target):
    if os.path.lexists(output):
        os.remove(output)
    os.symlink(target, output)


def assert_replaced_not_followed(output, victim_path):
    assert open(victim_path, "rb").read() == VICTIM_TEXT, f"{victim_path} was written through the link at {output}"
    assert not os.path.islink(output) and os.path.isfile(output), f"{output} is not a new regular file"
    leftovers = [n for n in os.listdir(os.path.dirname(output)) if n.endswith(".partial")]
    assert not leftovers, leftovers


def strict_json(stdout_bytes, lines=False):
    """Parses cpullm's output as UTF-8 (strictly: an invalid byte fails) JSON."""
    text = stdout_bytes.decode("utf-8")
    return [json.loads(line) for line in text.splitlines()] if lines else json.loads(text)


def run_bytes(args, timeout=300):
    proc = subprocess.run(args, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}: {proc.stderr[-2000:]!r}"
    return proc


@pytest.fixture(scope="module")
def ctx(ctx):
    """The tiny model, and copies of it with text that is not UTF-8 in a metadata value, a token
    piece, a tensor name and the file's own path."""
    ctx.tiny = os.path.join(ctx.workdir, "tiny.gguf")
    write_tiny_model(ctx.cpullm, ctx.tiny)
    g = GGUFFile(ctx.tiny)
    last_piece = g.metadata["tokenizer.ggml.tokens"][-1].encode()
    # general.name: a terminal escape and invalid UTF-8; the vocabulary's last piece: invalid bytes.
    ctx.bad_text = patched(ctx.tiny, os.path.join(ctx.workdir, "bad-text.gguf"),
                           [(b"synthetic", b"\x1b[2J\xff\xfe\xc0\x80Z"),
                            (struct.pack("<Q", len(last_piece)) + last_piece,
                             struct.pack("<Q", len(last_piece)) + b"\xff" * len(last_piece))])
    ctx.bad_tensor_name = patched(ctx.tiny, os.path.join(ctx.workdir, "bad-tensor-name.gguf"),
                                  [(struct.pack("<Q", 13) + b"output.weight",
                                    struct.pack("<Q", 13) + b"outp\xff\xfe\x1bweight")])
    # A model whose vocabulary cannot be found: its tokenizer.ggml.model key renamed.
    ctx.no_vocabulary = patched(ctx.tiny, os.path.join(ctx.workdir, "no-vocabulary.gguf"),
                                [(b"tokenizer.ggml.model", b"tokenizer.ggml.MODEL")])
    ctx.bad_path = os.path.join(os.fsencode(ctx.workdir), b"model-\xff\xfe.gguf")
    with open(ctx.bad_path, "wb") as f:
        f.write(open(ctx.bad_text, "rb").read())
    return ctx


# --- Finding 1: outputs cannot be redirected ---------------------------------------------------

def test_eval_quant_folder_cannot_be_planted(ctx):
    """The old folder was $TMPDIR/cpullm-eval-<pid>, accepted if it existed. The shell's pid is
    the pid cpullm runs under after exec, so the shell plants the folder and a link in it."""
    tmpdir = os.path.join(ctx.workdir, "tmp")
    os.makedirs(tmpdir)
    target = victim(ctx, "victim-eval")
    script = ('mkdir "$TMPDIR/cpullm-eval-$$" && ln -s "$VICTIM" "$TMPDIR/cpullm-eval-$$/q8_0.gguf" && '
              'exec "$CPULLM" eval-quant -m "$MODEL" --formats q8_0 --window 16 -t 1 --json')
    env = dict(os.environ, TMPDIR=tmpdir, VICTIM=target, CPULLM=ctx.cpullm, MODEL=ctx.tiny)
    proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert [r["format"] for r in json.loads(proc.stdout)] == ["source", "q8_0"], proc.stdout
    assert open(target, "rb").read() == VICTIM_TEXT, "eval-quant wrote through the planted link"
    planted = [n for n in os.listdir(tmpdir)]
    assert len(planted) == 1 and os.path.islink(os.path.join(tmpdir, planted[0], "q8_0.gguf")), \
        f"eval-quant's own folder left behind, or the planted one changed: {planted}"


def test_planted_links_at_outputs_are_replaced(ctx):
    folder = os.path.join(ctx.workdir, "outputs")
    os.makedirs(folder)
    target = victim(ctx, "victim-out")
    cases = [("gen.gguf", lambda out: [ctx.cpullm, "gen-model", "--shape", "custom", "--layers", "1", "--dim", "64",
                                       "--ffn", "128", "--heads", "4", "--vocab", "400", "-o", out]),
             ("quant.gguf", lambda out: [ctx.cpullm, "quantize", ctx.tiny, out, "--type", "q8_0"]),
             ("logits.npy", lambda out: [ctx.cpullm, "logits", "-m", ctx.tiny, "-p", "once", "-o", out]),
             ("ci-tiny-f32.gguf", lambda out: [ctx.cpullm, "bench", "--workload", "ci-tiny", "--workload-dir", folder,
                                               "-t", "1", "-r", "1", "-o", "json"])]
    for name, command in cases:
        out = os.path.join(folder, name)
        plant_link(ctx, out, target)
        if name.startswith("ci-tiny"):  # a workload's model was written under the fixed name OUT.partial
            os.remove(out)
            os.symlink(target, out + ".partial")
            run(command(out))
            assert open(target, "rb").read() == VICTIM_TEXT, "bench wrote the workload model through a planted link"
            assert not os.path.islink(out) and os.path.isfile(out), "the workload model is not a regular file"
            os.remove(out + ".partial")
            continue
        run(command(out))
        assert_replaced_not_followed(out, target)


def test_python_tools_replace_planted_links(ctx):
    """report -o writes through tuning/files.py as sweep's table and configs, tune's summary,
    nightly's dashboard and the screenshot do: a planted link is replaced, its target untouched.
    The sweep's state grows by appending, so a link or a FIFO there is refused, at once."""
    from tuning import files
    folder = os.path.join(ctx.workdir, "python-outputs")
    os.makedirs(folder)
    target = victim(ctx, "victim-python")
    out = os.path.join(folder, "report.html")
    plant_link(ctx, out, target)
    run([ctx.cpullm, "report", "-o", out])
    assert_replaced_not_followed(out, target)
    assert "cpullm report" in open(out).read()
    state = os.path.join(folder, "sweep-state.jsonl")
    os.symlink(target, state)
    with pytest.raises(OSError):
        files.open_append(state)
    os.remove(state)
    os.mkfifo(state)
    with pytest.raises(OSError):  # ENXIO: no reader; opening does not wait for one
        files.open_append(state)
    with pytest.raises(OSError, match="not a regular file"):
        files.read_input(state)
    assert open(target, "rb").read() == VICTIM_TEXT


# --- Finding 2: invalid UTF-8 gives valid JSON ---------------------------------------------------

def test_info_json_of_invalid_utf8_is_valid_json(ctx):
    for path in (ctx.bad_text, ctx.bad_tensor_name, ctx.bad_path):
        data = strict_json(run_bytes([ctx.cpullm, "info", path, "--json"]).stdout)
        assert data["totals"]["tensors"] == len(data["tensors"])
    data = strict_json(run_bytes([ctx.cpullm, "info", ctx.bad_text, "--json"]).stdout)
    assert data["metadata"]["general.name"]["value"].startswith("cpullm \x1b[2J\ufffd\ufffd\ufffd\ufffdZ"), \
        data["metadata"]["general.name"]
    assert data["metadata"]["tokenizer.ggml.tokens"]["value"][-1].strip("\ufffd") == ""
    names = [t["name"] for t in strict_json(run_bytes([ctx.cpullm, "info", ctx.bad_tensor_name, "--json"]).stdout)["tensors"]]
    assert "outp\ufffd\ufffd\x1bweight" in names, names
    assert strict_json(run_bytes([ctx.cpullm, "info", ctx.bad_path, "--json"]).stdout)["file"].endswith("model-\ufffd\ufffd.gguf")


def test_bench_and_profile_json_of_invalid_utf8_are_valid_json(ctx):
    for path in (ctx.bad_text, ctx.bad_path):
        base = [ctx.cpullm, "bench", "-m", path, "-t", "1", "-p", "4", "-n", "2", "-r", "1"]
        records = strict_json(run_bytes(base + ["-o", "json"]).stdout)
        assert len(records) == 2 and records[0]["model_filename"], records
        assert len(strict_json(run_bytes(base + ["-o", "jsonl"]).stdout, lines=True)) == 2
        profile = strict_json(run_bytes([ctx.cpullm, "profile", "-m", path, "-t", "1", "-p", "4", "-n", "2", "--json",
                                         "--no-counters"]).stdout)
        assert profile["phases"], profile
    records = strict_json(run_bytes([ctx.cpullm, "bench", "-m", ctx.bad_path, "-t", "1", "-p", "4", "-n", "0", "-r", "1",
                                     "-o", "json"]).stdout)
    assert records[0]["model_filename"].endswith("model-\ufffd\ufffd.gguf"), records[0]["model_filename"]


def test_bench_db_of_invalid_utf8_finishes_its_run(ctx):
    db = os.path.join(ctx.workdir, "utf8.db")
    run_bytes([ctx.cpullm, "bench", "-m", ctx.bad_path, "-t", "1", "-p", "4", "-n", "2", "-r", "1", "--no-regions",
               "--db", db, "-o", "jsonl"])
    with sqlite3.connect(db) as connection:
        runs = connection.execute("SELECT id, finished_at FROM runs").fetchall()
        points = connection.execute("SELECT count(*) FROM results").fetchone()[0]
    assert len(runs) == 1 and runs[0][1] is not None and points == 2, (runs, points)
    stored = strict_json(run_bytes([ctx.cpullm, "db", "--db", db, "results", str(runs[0][0]), "--export-json"]).stdout)
    assert stored["results"][0]["model_filename"].endswith("model-\ufffd\ufffd.gguf"), stored["results"][0]
    assert strict_json(run_bytes([ctx.cpullm, "db", "--db", db, "runs", "--export-json"]).stdout)[0]["command"]


# --- Finding 7: what used to hang --------------------------------------------------------------

def test_fifo_as_the_model_is_refused(ctx):
    fifo = os.path.join(ctx.workdir, "model.fifo")
    os.mkfifo(fifo)
    for command in (["info", fifo], ["info", fifo, "--json"], ["generate", "-m", fifo, "-n", "1"],
                    ["bench", "-m", fifo, "-p", "1", "-n", "0"], ["quantize", fifo, fifo + ".q", "--type", "q8_0"]):
        proc = run([ctx.cpullm] + command, expect_ok=False, timeout=30)  # the old open() waited here for a writer
        assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1] == f"cpullm: error: {fifo}: not a regular file", \
            (command, proc.returncode, proc.stderr)


def sparse_huge_model(ctx):
    """The tiny model (dim 64, ffn 128, KV width 32) made 4096 times wider: 4.9 TB of F32 weights
    declared, header and metadata consistent, the file extended without data (sparse)."""
    scale = 4096
    wider = {64: 64 * scale, 128: 128 * scale, 32: 32 * scale}  # the vocabulary (1000) stays
    header = patched(ctx.tiny, os.path.join(ctx.workdir, "wide-header.gguf"), [
        (u32_value(key, value), u32_value(key, value * scale))
        for key, value in (("llama.embedding_length", 64), ("llama.feed_forward_length", 128),
                           ("llama.rope.dimension_count", 16))])
    buf = bytearray(open(header, "rb").read())
    g = GGUFFile(ctx.tiny)
    header_end = min(start for _, _, start in g.tensors.values())
    offset = 0
    for name, (ne, gtype, _) in g.tensors.items():
        key = struct.pack("<Q", len(name)) + name.encode() + struct.pack("<I", len(ne))
        at = buf.index(key) + len(key)
        extents = [wider.get(n, n) for n in ne]
        struct.pack_into(f"<{len(ne)}QIQ", buf, at, *extents, gtype, offset)
        offset += (math.prod(extents) * 4 + 31) // 32 * 32
    assert offset > 4 << 40, offset
    path = os.path.join(ctx.workdir, "huge-sparse.gguf")
    with open(path, "wb") as f:
        f.write(bytes(buf[:header_end]))
        f.truncate(header_end + offset)
    return path


def test_sparse_4tib_model_is_refused_without_reading_it(ctx):
    path = sparse_huge_model(ctx)
    try:
        proc = subprocess.Popen([ctx.cpullm, "generate", "-m", path, "-n", "1"], stderr=subprocess.PIPE, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        error = proc.stderr.read().strip()
        proc.stderr.close()
    finally:
        os.remove(path)
    assert os.waitstatus_to_exitcode(status) == 1 and error.startswith("cpullm: error: "), (status, error)
    assert "does not fit" in error or "GiB" in error, error
    assert usage.ru_maxrss < 256 * 1024, f"peak resident {usage.ru_maxrss} KiB refusing a sparse model"
    print(f"refused at {usage.ru_maxrss // 1024} MiB peak resident: {error[:120]}")


def test_huge_synthetic_topology_is_refused(ctx):
    expect_error([ctx.cpullm, "topo", "--synthetic", "pack:64 numa:64 core:64 pu:64"], "16777216 PUs", "at most 4096")
    expect_error([ctx.cpullm, "topo", "--synthetic", "pack:99999999999999999999 pu:2"], "at most 4096")
    expect_error([ctx.cpullm, "topo", "--synthetic", "pack:2 [numa(memory=1GiB)] l3:1(size=8MiB) core:64 pu:64"],
                 "8192 PUs")
    out = run([ctx.cpullm, "topo", "--synthetic", "pack:4 [numa(memory=1GiB)] l3:1(size=8MiB) core:32 pu:32", "--json"]).stdout
    assert json.loads(out), out


# --- Finding 8: values that make no sense --------------------------------------------------------

def test_block_count_below_the_blocks_present_is_refused(ctx):
    path = patched(ctx.tiny, os.path.join(ctx.workdir, "blocks.gguf"),
                   [(u32_value("llama.block_count", 2), u32_value("llama.block_count", 1))])
    expect_error([ctx.cpullm, "generate", "-m", path, "-n", "1"], "is in block 1, but llama.block_count is 1")


def test_non_finite_rope_base_is_refused(ctx):
    for value in (math.inf, -math.inf, math.nan, 0.0, -5.0):
        path = patched(ctx.tiny, os.path.join(ctx.workdir, "rope.gguf"),
                       [(f32_value("llama.rope.freq_base", 10000.0), f32_value("llama.rope.freq_base", value))])
        expect_error([ctx.cpullm, "generate", "-m", path, "-n", "1"], "llama.rope.freq_base is")


def test_nan_weights_stop_with_non_finite_logits(ctx):
    g = GGUFFile(ctx.tiny)
    ne, _, start = g.tensors["output_norm.weight"]
    buf = bytearray(open(ctx.tiny, "rb").read())
    struct.pack_into(f"<{ne[0]}f", buf, start, *([math.nan] * ne[0]))
    path = os.path.join(ctx.workdir, "nan.gguf")
    open(path, "wb").write(bytes(buf))
    for command in (["generate", "-m", path, "-n", "4", "--temp", "0"], ["generate", "-m", path, "-n", "4"],
                    ["logits", "-m", path, "-p", "once", "-o", path + ".npy"],
                    ["bench", "-m", path, "-p", "4", "-n", "2", "-r", "1", "-t", "1"],
                    ["profile", "-m", path, "-p", "4", "-n", "2", "-t", "1", "--no-counters"]):
        expect_error([ctx.cpullm] + command, "the logits are not finite")


def test_info_escapes_control_characters(ctx):
    out = run_bytes([ctx.cpullm, "info", ctx.bad_text]).stdout
    assert b"\x1b" not in out, "info printed a raw escape character"
    text = out.decode("utf-8")
    assert "cpullm \\x1b[2J\ufffd\ufffd\ufffd\ufffdZ" in text, [l for l in text.splitlines() if "general.name" in l]
    assert b"\x1b" not in run_bytes([ctx.cpullm, "info", ctx.bad_tensor_name]).stdout


# --- Finding 6 and every command: the table of bad invocations -----------------------------------

def bad_invocations(ctx):
    w = ctx.workdir
    m, missing, plain, folder = ctx.tiny, os.path.join(w, "missing.gguf"), os.path.join(w, "plain.txt"), w
    under_file = os.path.join(plain, "sub")  # a path below a regular file
    fifo = os.path.join(w, "table.fifo")
    big_seed = str(2 ** 64)
    db = os.path.join(w, "table.db")
    return [
        # top level
        [], ["bogus"], ["--bogus"],
        # generate
        ["generate"], ["generate", "-m", missing], ["generate", "-m", folder], ["generate", "-m", plain],
        ["generate", "-m", fifo], ["generate", "-m", m, "-n", "-1"], ["generate", "-m", m, "--top-p", "2"],
        ["generate", "-m", m, "--temp", "-1"], ["generate", "-m", m, "-t", "10000"], ["generate", "-m", m, "--bogus"],
        ["generate", "-m", m, "--seed", big_seed], ["generate", "-m", m, "--seed", "-1"],
        ["generate", "-m", m, "--seed", "x"], ["generate", "-m", m, "--top-k", "-3"], ["generate", "-m", m, "--top-k", "x"],
        ["generate", "-m", m, "--isa", "avx1024"], ["generate", "-m", m, "--bind", "nowhere"],
        ["generate", "-m", m, "--kv-type", "f64"], ["generate", "-m", m, "-c", "8", "-n", "20"],
        ["generate", "-m", m, "--attn-tile", "0x0"], ["generate", "-m", m, "--config", missing],
        ["generate", "-m", m, "--housekeeping", "-1"], ["generate", "-m", m, "-n"], ["generate", "-m", m, "--np", "0"],
        # logits
        ["logits"], ["logits", "-m", m], ["logits", "-m", missing, "-p", "a", "-o", "x.npy"],
        ["logits", "-m", m, "-p", "a", "-o", os.path.join(under_file, "x.npy")],
        ["logits", "-m", m, "-p", "a", "-o", folder], ["logits", "-m", m, "-p", "a", "-o", "x.npy", "--isa", "z"],
        ["logits", "-m", fifo, "-p", "a", "-o", "x.npy"], ["logits", "-m", m, "--bogus", "-o", "x.npy"],
        ["logits", "-m", m, "--tokens", "1,99999999", "-o", "x.npy"], ["logits", "-m", m, "--tokens", "1,x", "-o", "x.npy"],
        ["logits", "-m", m, "--tokens", "-5", "-o", "x.npy"], ["logits", "-m", m, "-p", "a", "--tokens", "1", "-o", "x.npy"],
        # info
        ["info"], ["info", missing], ["info", plain], ["info", folder], ["info", fifo], ["info", m, "--bogus"],
        ["info", m, m], ["info", "--json"],
        # tokenize
        ["tokenize"], ["tokenize", "-p", "x"], ["tokenize", "-m", missing, "-p", "x"], ["tokenize", "-m", fifo, "-p", "x"],
        ["tokenize", "-m", plain, "-p", "x"], ["tokenize", "-m", ctx.no_vocabulary, "-p", "x"], ["tokenize", "-m", m],
        ["tokenize", "-m", m, "-p", "x", "-f", plain], ["tokenize", "-m", m, "-f", missing], ["tokenize", "-m", m, "-f", fifo],
        ["tokenize", "-m", m, "-f", folder], ["tokenize", "-m", m, "-p", "x", "--bogus"],
        # gen-model
        ["gen-model"], ["gen-model", "--shape", "gpt-9", "-o", "x"], ["gen-model", "--shape", "custom", "-o", "x"],
        ["gen-model", "--shape", "custom", "--dim", "64", "-o", os.path.join(w, "x")],
        ["gen-model", "--shape", "llama-7b", "--layers", "-1", "-o", os.path.join(w, "x")],
        ["gen-model", "--dtype", "q9", "-o", os.path.join(w, "x")], ["gen-model", "--seed", big_seed, "-o", os.path.join(w, "x")],
        ["gen-model", "--shape", "custom", "--layers", "1", "--dim", "64", "--ffn", "128", "--heads", "4", "--vocab", "400",
         "-o", os.path.join(under_file, "x.gguf")],
        ["gen-model", "--shape", "custom", "--layers", "1", "--dim", "64", "--ffn", "128", "--heads", "4", "--vocab", "400",
         "-o", folder],
        ["gen-model", "--shape", "custom", "--layers", "1", "--dim", "64", "--ffn", "128", "--heads", "4", "--vocab", "0",
         "-o", os.path.join(w, "x")],
        ["gen-model", "--layers", "x", "-o", os.path.join(w, "x")],
        ["gen-model", "--shape", "llama3-8b", "--rope-factor", "nan", "-o", os.path.join(w, "x")],
        ["gen-model", "--shape", "llama3-8b", "--rope-factor", "0", "-o", os.path.join(w, "x")],
        ["gen-model", "--shape", "llama3-8b", "--rope-scaling", "yarn", "-o", os.path.join(w, "x")],
        ["gen-model", "--shape", "mistral-7b", "--sliding-window", "-1", "-o", os.path.join(w, "x")],
        ["gen-model", "--shape", "qwen2.5-7b", "--layers", "1", "--dim", "64", "--ffn", "64", "--heads", "4",
         "--kv-heads", "4", "--vocab", "100", "-o", os.path.join(w, "x")],
        # quantize
        ["quantize"], ["quantize", m], ["quantize", m, os.path.join(w, "q.gguf")],
        ["quantize", m, os.path.join(w, "q.gguf"), "--type", "q7_k"], ["quantize", missing, os.path.join(w, "q.gguf"), "--type", "q8_0"],
        ["quantize", m, m, "--type", "q8_0"], ["quantize", m, os.path.join(under_file, "q.gguf"), "--type", "q8_0"],
        ["quantize", m, os.path.join(w, "q.gguf"), "--type", "q8_0", "--keep", "blk.*.nothing"],
        ["quantize", m, os.path.join(w, "q.gguf"), "--type", "f16", "--sparsity-pattern", "9:4"],
        ["quantize", plain, os.path.join(w, "q.gguf"), "--type", "q8_0"], ["quantize", fifo, os.path.join(w, "q.gguf"), "--type", "q8_0"],
        # eval-quant
        ["eval-quant"], ["eval-quant", "-m", m], ["eval-quant", "-m", missing, "--formats", "q8_0"],
        ["eval-quant", "-m", m, "--formats", "q9"], ["eval-quant", "-m", m, "--formats", "q8_0", "--window", "1"],
        ["eval-quant", "-m", m, "--formats", "q8_0", "--text", missing],
        ["eval-quant", "-m", m, "--formats", "q8_0", "--text", fifo],
        ["eval-quant", "-m", m, "--formats", "q8_0", "--files", under_file, "--window", "8"],
        ["eval-quant", "-m", m, "--formats", "q8_0", "-t", "-2"],
        # topo
        ["topo", "--synthetic", "pack:64 numa:64 core:64 pu:64"], ["topo", "--synthetic", "garbage((("],
        ["topo", "--xml", missing], ["topo", "--hardware", "no-such-profile"], ["topo", "--bogus"],
        ["topo", "--synthetic", "pu:2", "--xml", plain], ["topo", "-m", missing], ["topo", "--numa", "everywhere"],
        ["topo", "--shape", "llama-99b"],
        # profile
        ["profile"], ["profile", "-m", missing], ["profile", "-m", m, "-t", "10000"], ["profile", "-m", m, "--bogus"],
        ["profile", "-m", m, "-n", "-1"], ["profile", "-m", m, "-p", "0"], ["profile", "-m", m, "--kv-type", "x"],
        ["profile", "-m", fifo], ["profile", "-m", m, "--hardware", missing],
        ["profile", "-m", m, "--hardware", fifo], ["profile", "-m", m, "-r", "0", "--overhead"],
        # bench
        ["bench", "-m", missing], ["bench", "-m", m, "-p", "x"], ["bench", "-m", m, "-r", "0"], ["bench", "-m", m, "-o", "xml"],
        ["bench", "-m", m, "-t", "-1"], ["bench", "--workload", "nope"], ["bench", "-m", m, "--bogus"],
        ["bench", "--workload", "ci-tiny", "--workload-dir", under_file, "-r", "1"],
        ["bench", "-m", m, "--load", "--seed", big_seed], ["bench", "-m", m, "--db", folder, "-p", "1", "-n", "0"],
        ["bench", "-m", m, "--resume"], ["bench", "-m", m, "--rate", "x", "--load"], ["bench", "-m", fifo, "-p", "1", "-n", "0"],
        ["bench", "-m", plain, "-p", "1", "-n", "0"], ["bench", "-m", m, "--workloads-file", missing, "--workload", "x"],
        ["bench", "-m", m, "--workloads-file", fifo, "--workload", "x"], ["topo", "--xml", fifo],
        ["generate", "-m", m, "--config", fifo], ["bench", "-m", m, "--config", fifo],
        ["bench", "-m", m, "--housekeeping", "-1"],
        # db
        ["db"], ["db", "--db", db], ["db", "--db", db, "bogus"], ["db", "--db", m, "runs"], ["db", "--db", plain, "runs"],
        ["db", "--db", folder, "runs"], ["db", "--db", db, "results", "-5"], ["db", "--db", db, "results", "x"],
        ["db", "--db", db, "runs", "--bogus"],
        # Python commands
        ["sweep"], ["sweep", "--bogus"], ["sweep", "-m", m], ["sweep", "-m", m, "--space", missing, "--cpullm", ctx.cpullm],
        ["sweep", "-m", m, "--space", plain, "--cpullm", ctx.cpullm], ["sweep", "-m", m, "--space", missing, "--eta", "x"],
        ["tune"], ["tune", "--bogus"], ["tune", "--hardware", "x", "-m", m, "--batches", "x"],
        ["tune", "--hardware", "x", "-m", m, "--formats", "q9"], ["tune", "--hardware", "x", "-m", m, "--prompt", "many"],
        ["report"], ["report", "--bogus", "-o", os.path.join(w, "r.html")], ["report", "-o", os.path.join(w, "r.html"), "--runs", "x"],
        ["report", "-o", os.path.join(w, "r.html"), "--assumptions", missing],
        ["report", "-o", os.path.join(w, "r.html"), "--assumptions", plain],
        ["report", "-o", os.path.join(w, "r.html"), "--assumptions", fifo],
        ["report", "-o", os.path.join(w, "r.html"), "--gpu-results", fifo],
        ["sweep", "-m", m, "--space", fifo, "--cpullm", ctx.cpullm],
        ["report", "-o", os.path.join(under_file, "r.html")],
    ]


def test_every_bad_invocation_is_one_error_line(ctx):
    open(os.path.join(ctx.workdir, "plain.txt"), "w").write("not a model\n")
    os.mkfifo(os.path.join(ctx.workdir, "table.fifo"))
    cases = bad_invocations(ctx)
    assert len(cases) >= 100, len(cases)
    wrong = []
    for args in cases:
        proc = subprocess.run([os.path.abspath(ctx.cpullm)] + args, capture_output=True, text=True, timeout=120, cwd=ctx.workdir,
                              errors="replace")
        lines = proc.stderr.strip().splitlines()
        errors = [line for line in lines if line.startswith("cpullm: error: ")]
        # Progress lines may come first (bench names each point); the error is the one last line.
        if proc.returncode != 1 or len(errors) != 1 or lines[-1] != errors[0] or "Traceback" in proc.stderr:
            wrong.append(f"{args}: exit {proc.returncode}, stderr {proc.stderr.strip()[-300:]!r}")
    assert not wrong, f"{len(wrong)} of {len(cases)}:\n" + "\n".join(wrong)
    print(f"{len(cases)} bad invocations, each one error line and exit status 1")

