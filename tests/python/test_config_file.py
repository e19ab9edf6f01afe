"""`--config FILE` of generate and bench, on a tiny synthetic model: the file `cpullm sweep`
writes (tuning/results.py's writer) read back by both commands and applied, its [bench]
section by bench alone; a [generate] section; the command line winning over the file and a
section over the top level; and malformed files (TOML that a strict parser refuses, an unknown
section or key, a byte-order mark inside a key, a NUL byte, a FIFO) each refused with one
`cpullm: error: FILE: ...` line naming the key where there is one.
"""
import json
import os

import pytest

from cli_checks import expect_error, run, write_tiny_model
from tuning import results as res


@pytest.fixture(scope="module")
def ctx(ctx):
    ctx.tiny = os.path.join(ctx.workdir, "tiny.gguf")
    write_tiny_model(ctx.cpullm, ctx.tiny)
    return ctx


def write(ctx, name, content):
    path = os.path.join(ctx.workdir, name)
    with open(path, "wb") as f:
        f.write(content.encode() if isinstance(content, str) else content)
    return path


def bench_row(ctx, *args):
    [row] = json.loads(run([ctx.cpullm, "bench", "-p", "0", "-n", "2", "-r", "1", "-o", "json", *args]).stdout)
    return row


def generate(ctx, *args):
    return run([ctx.cpullm, "generate", "-p", "Once", "-n", "2", "--temp", "0", *args]).stderr


def test_sweep_config_read_by_bench_and_generate(ctx):
    path = os.path.join(ctx.workdir, "best.toml")
    point = {"threads": 2, "bind": "compact", "kv_type": "f16", "sequences": 2, "placement": "interleave", "batch": 8}
    res.write_config(path, ctx.tiny, point, ["cpullm sweep: best for throughput"])
    assert "\n[bench]\n" in open(path).read()
    row = bench_row(ctx, "--config", path)
    assert (row["model_filename"], row["n_threads"], row["binding"], row["kv_type"], row["n_seq"],
            row["n_batch"]) == (ctx.tiny, 2, "compact", "f16", 2, 8), row
    assert "/interleave/" in row["case_name"], row  # asked for (one NUMA node runs it as first-touch)
    # generate takes the top level (model, threads, sequences, ...) and leaves [bench] to bench.
    stderr = generate(ctx, "--config", path)
    assert "| 2 threads" in stderr and "2 sequences" in stderr, stderr


def test_command_line_wins_then_the_section(ctx):
    path = write(ctx, "layers.toml", f'model = "{ctx.tiny}"\nthreads = 1\nkv-type = "f32"\n\n'
                                     '[bench]\nthreads = 2\n\n[generate]\nnp = 3\n')
    row = bench_row(ctx, "--config", path)
    assert (row["n_threads"], row["kv_type"]) == (2, "f32"), row  # [bench] over the top level
    assert bench_row(ctx, "--config", path, "-t", "1")["n_threads"] == 1  # the command line over both
    stderr = generate(ctx, "--config", path)
    assert "| 1 threads" in stderr, stderr
    assert "3 sequences" in stderr, stderr  # [generate] applies to generate


def test_byte_order_mark_at_the_start_is_skipped(ctx):
    path = write(ctx, "bom.toml", b"\xef\xbb\xbfthreads = 2\n")
    assert bench_row(ctx, "-m", ctx.tiny, "--config", path)["n_threads"] == 2


def test_malformed_files_are_refused_naming_file_and_key(ctx):
    cases = [
        ("genrate.toml", "[genrate]\nthreads = 2\n", ["[genrate] is not a section", "[bench] and [generate] and [serve]"]),
        ("key.toml", "thread = 2\n", ["'thread' is not an option of cpullm bench"]),
        ("other-section.toml", "[generate]\nn-prompt = 4\n", ["'[generate] n-prompt' is not an option of cpullm generate"]),
        ("unterminated.toml", 'threads = "2\n', ["line 1"]),
        ("bom-key.toml", "cold = true\n\ufeffthreads = 2\n", ["line 2"]),
        ("nul.toml", b"threads = 2\x00\n", ["line 1"]),
        ("nul-key.toml", '"th\\u0000reads" = 2\n', ["th\\x00reads"]),
        ("nul-value.toml", 'kv-type = "f\\u0000"\n', ["kv-type: a NUL character"]),
        ("nested.toml", "[bench.deeper]\nthreads = 2\n", ["[bench] deeper: a table"]),
        ("date.toml", "threads = 1979-05-27\n", ["threads: a date or time"]),
        ("empty-array.toml", "threads = []\n", ["threads: an empty array"]),
        ("duplicate.toml", "threads = 1\nthreads = 2\n", ["line 2"]),
        ("bad-value.toml", 'repetitions = "many"\n', ["repetitions:"]),
        ("flag-list.toml", "cold = [true, false]\n", ["cold: a flag takes one value"]),
        ("itself.toml", 'config = "x.toml"\n', ["config: a config file does not name another"]),
        ("help.toml", "help = true\n", ["help: not an option a config file sets"]),
    ]
    for name, content, fragments in cases:
        path = write(ctx, name, content)
        expect_error([ctx.cpullm, "bench", "-m", ctx.tiny, "--config", path], f"{path}: ", *fragments)
        last = run([ctx.cpullm, "bench", "-m", ctx.tiny, "--config", path], expect_ok=False).stderr.strip()
        assert "\n" not in last and "\x00" not in last, repr(last)
    # generate checks a [bench] key against bench's options too.
    path = write(ctx, "bench-key.toml", "[bench]\nthreadz = 2\n")
    expect_error([ctx.cpullm, "generate", "-m", ctx.tiny, "--config", path], "'[bench] threadz' is not an option of cpullm bench")
    fifo = os.path.join(ctx.workdir, "fifo.toml")
    os.mkfifo(fifo)
    expect_error([ctx.cpullm, "bench", "-m", ctx.tiny, "--config", fifo], f"{fifo}: not a regular file")
    expect_error([ctx.cpullm, "generate", "-m", ctx.tiny, "--config", os.path.join(ctx.workdir, "absent.toml")], "absent.toml")

