"""End-to-end checks of Top-K sparsity through the command line: `quantize --sparsity` for each
pattern, `info` naming the sparse types, `generate` running the pruned model, `eval-quant` with
sparse formats, and bad flags or a corrupt index ending in one clear error line and exit 1.
"""
import json
import os

import pytest

from cli_checks import expect_error, run, write_tiny_model


def test_tiny_f16_model(ctx):
    write_tiny_model(ctx.cpullm, ctx.model, dtype="f16", context=64)


def test_quantize_info_and_generate_each_pattern(ctx):
    for pattern, flags, type_name in [("unstructured", ["--sparsity", "0.2"], "CPULLM_SPARSE_ELL_F16"),
                                      ("2:4", ["--sparsity-pattern", "2:4"], "CPULLM_SPARSE_NM_F16"),
                                      ("block4x4", ["--sparsity", "0.5", "--sparsity-pattern", "block4x4"],
                                       "CPULLM_SPARSE_B4X4_F16")]:
        out = os.path.join(ctx.workdir, f"pruned-{pattern.replace(':', 'of')}.gguf")
        proc = run([ctx.cpullm, "quantize", ctx.model, out] + flags)
        assert "14 tensors converted" in proc.stderr, proc.stderr
        info = run([ctx.cpullm, "info", out]).stdout
        assert type_name in info, f"{pattern}: info lacks {type_name}"
        gen = run([ctx.cpullm, "generate", "-m", out, "-p", "Once upon a time", "-n", "8", "--temp", "0"])
        assert "tok/s" in gen.stderr or "tokens" in gen.stderr, gen.stderr
        ctx.pruned[pattern] = out


def test_eval_quant_accepts_sparse_formats(ctx):
    out = run([ctx.cpullm, "eval-quant", "-m", ctx.model, "--formats", "f16+sparse0.2,2:4,block0.5", "--window", "32",
               "--text", ctx.text]).stdout
    for name in ["f16+sparse0.2", "2:4", "block0.5"]:
        assert name in out, out


def test_bad_flags_and_hostile_indices(ctx):
    out = os.path.join(ctx.workdir, "never.gguf")
    expect_error([ctx.cpullm, "quantize", ctx.model, out], "--type", "--sparsity")
    expect_error([ctx.cpullm, "quantize", ctx.model, out, "--sparsity", "1.5"], "--sparsity")
    expect_error([ctx.cpullm, "quantize", ctx.model, out, "--sparsity", "0.2", "--sparsity-pattern", "2:4"], "contradicts")
    expect_error([ctx.cpullm, "quantize", ctx.model, out, "--sparsity", "0.2", "--type", "q8_0"], "F32, F16 or BF16")
    expect_error([ctx.cpullm, "eval-quant", "-m", ctx.model, "--formats", "f16+sparse"], "sparse0.2")
    # The last stored column of blk.1.ffn_up's last row (its final two bytes) set to 65535.
    pruned = ctx.pruned.get("unstructured")
    if not pruned:
        pytest.skip("no pruned model")
    info = json.loads(run([ctx.cpullm, "info", pruned, "--json"]).stdout)
    t = next(t for t in info["tensors"] if t["name"] == "blk.1.ffn_up.weight")
    data = bytearray(open(pruned, "rb").read())
    end = info["data_offset"] + t["offset"] + t["bytes"]
    data[end - 2:end] = b"\xff\xff"
    hostile = os.path.join(ctx.workdir, "hostile.gguf")
    open(hostile, "wb").write(data)
    expect_error([ctx.cpullm, "generate", "-m", hostile, "-n", "1"], "blk.1.ffn_up.weight", "outside")


@pytest.fixture(scope="module")
def ctx(ctx):
    ctx.model = os.path.join(ctx.workdir, "tiny.gguf")
    ctx.text = os.path.join(ctx.workdir, "text.txt")
    with open(ctx.text, "w", encoding="utf-8") as f:
        f.write("Once upon a time there was a little cat. The cat liked to play in the sun. " * 4)
    ctx.pruned = {}
    return ctx
