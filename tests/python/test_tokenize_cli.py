"""`cpullm tokenize` end to end: on the vocabulary-only files of ../shared/models (Llama 2's
SentencePiece, Llama 3's and Qwen2's byte-level BPE) the ids equal llama.cpp's fixtures, from -p
and from -f; BOS as each vocabulary asks, --no-bos, --special; a synthetic model's vocabulary
without the shared files. Bad invocations are in test_hardening.py's table."""
import os

import pytest

from cli_checks import expect_error, run, write_tiny_model

VOCABULARIES = ["ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-bpe.gguf", "ggml-vocab-qwen2.gguf"]
BOS = {"ggml-vocab-llama-spm.gguf": 1, "ggml-vocab-llama-bpe.gguf": 128000, "ggml-vocab-qwen2.gguf": None}
# Cases of the fixtures: plain words, an emoji, mixed scripts and digits, runs of white space.
CASES = [11, 18, 32, 45]


def vocabulary(ctx, name):
    path = os.path.join(ctx.shared, name)
    if not os.path.isfile(path):
        pytest.skip(f"../shared/models/{name} not found")
    return path


def fixture_cases(path):
    """(text as bytes, expected ids) per case of llama.cpp's .inp/.out files."""
    inputs = open(path + ".inp", "rb").read().split(b"\n__ggml_vocab_test__\n")
    outputs = open(path + ".out", encoding="ascii").read().split("\n")
    return [(inputs[i], [int(x) for x in outputs[i].split()]) for i in range(46)]


def tokenize(ctx, *args):
    line = run([ctx.cpullm, "tokenize", *args]).stdout
    assert line.endswith("\n") and line.count("\n") == 1, repr(line)
    return [int(x) for x in line.split()]


@pytest.mark.parametrize("name", VOCABULARIES)
def test_ids_equal_the_fixtures(ctx, name):
    path = vocabulary(ctx, name)
    cases = fixture_cases(path)
    for i in CASES:
        text, expected = cases[i]
        text_file = os.path.join(ctx.workdir, f"case-{i}.txt")
        open(text_file, "wb").write(text)  # through a file, every byte as it is
        assert tokenize(ctx, "-m", path, "-f", text_file, "--no-bos") == expected, f"case {i}: {text!r}"
    text, expected = cases[11]
    assert tokenize(ctx, "-m", path, "-p", text.decode(), "--no-bos") == expected
    bos = [BOS[name]] if BOS[name] is not None else []
    assert tokenize(ctx, "-m", path, "-p", text.decode()) == bos + expected


def test_special_tokens_only_with_special(ctx):
    path = vocabulary(ctx, "ggml-vocab-llama-bpe.gguf")
    assert tokenize(ctx, "-m", path, "-p", "<|eot_id|>", "--special", "--no-bos") == [128009]
    plain = tokenize(ctx, "-m", path, "-p", "<|eot_id|>", "--no-bos")
    assert len(plain) > 1 and all(i < 128000 for i in plain)


def test_text_that_is_not_utf8_is_refused_by_bpe(ctx):
    path = vocabulary(ctx, "ggml-vocab-qwen2.gguf")
    text_file = os.path.join(ctx.workdir, "latin1.txt")
    open(text_file, "wb").write("caf\u00e9".encode("latin-1"))
    expect_error([ctx.cpullm, "tokenize", "-m", path, "-f", text_file], "not valid UTF-8", "0xE9 at offset 3")


def test_a_synthetic_models_vocabulary(ctx):
    model = os.path.join(ctx.workdir, "tiny.gguf")
    write_tiny_model(ctx.cpullm, model)
    ids = tokenize(ctx, "-m", model, "-p", "once upon a time")
    assert ids[0] == 1 and len(ids) == 5
    assert tokenize(ctx, "-m", model, "-p", "once upon a time", "--no-bos") == ids[1:]
    assert tokenize(ctx, "-m", model, "-p", "") == [1]


@pytest.mark.parametrize("shape", ["llama3-8b", "qwen2.5-7b"])
def test_generate_on_a_bpe_shape_decodes_through_its_vocabulary(ctx, shape):
    """A 2-layer cut of the Llama 3 / Qwen2.5 shape with its full byte-level BPE vocabulary:
    generate tokenizes the prompt as `tokenize` does and prints it and the new tokens as text."""
    model = os.path.join(ctx.workdir, f"{shape}-2l.gguf")
    run([ctx.cpullm, "gen-model", "--shape", shape, "--layers", "2", "--dim", "64", "--ffn", "160", "--heads", "4",
         "--kv-heads", "2", "--dtype", "f32", "--seed", "3", "-o", model])
    prompt = "Hello world, once upon a time"
    ids = tokenize(ctx, "-m", model, "-p", prompt)
    assert len(ids) < len(prompt), ids  # merges, not one token a byte
    out = run([ctx.cpullm, "generate", "-m", model, "-p", prompt, "-n", "8", "--temp", "0", "-t", "2"])
    assert out.stdout.startswith(prompt), out.stdout
    assert f"prompt {len(ids)} tokens" in out.stderr, out.stderr
