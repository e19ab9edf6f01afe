"""The Python tools' view of the engine equals the binary's.

- tuning/registry.py's formats are `cpullm info --formats --json`'s, and each format's row bytes
  are the ones the binary sizes a model with (`info --costs --shape`);
- roofline's tensor formats and sizes after `quantize --type F` (its rules, the registry's facts)
  are those of the file `cpullm quantize` writes, for every format of the registry;
- `info MODEL --costs` agrees with the file and with the analytic formulas (op_costs.hpp);
- reports/predict.py's LLaMA shapes are the binary's;
- the sweep space takes every format the registry lists, its constraints raise no KeyError for any
  pair, and `cpullm sweep` over every format runs;
- the KV cache's types are the binary's one list, everywhere a tool checks a name against it.

The modules ask the binary named by $CPULLM_BIN, the binary under test (conftest.py).
"""
import json
import os

from cli_checks import expect_error, run
from reports import predict
from tuning import measure, registry, roofline
from tuning import space as sp


def info(ctx, *args):
    return json.loads(run([ctx.cpullm, "info", *args, "--json"]).stdout)


def tiny_model(ctx):
    """A 2-layer F32 model: dim 64, 4 heads (2 KV heads), ffn 80 (ffn_down's rows are not whole
    32-value blocks: the integer formats fall back to F16 there), vocabulary 1000."""
    path = os.path.join(ctx.workdir, "tiny-f32.gguf")
    if not os.path.exists(path):
        run([ctx.cpullm, "gen-model", "--shape", "custom", "--layers", "2", "--dim", "64", "--ffn", "80", "--heads", "4",
             "--kv-heads", "2", "--vocab", "1000", "--ctx", "256", "--dtype", "f32", "-o", path])
    return path


def test_python_formats_are_the_binarys(ctx):
    binary = info(ctx, "--formats")["formats"]
    assert list(registry.formats().values()) == binary, (registry.formats(), binary)
    assert "q4_1" in registry.format_names() and "q4_0-r8" in registry.format_bits()
    for f in binary:
        assert registry.ggml_type(f["name"]) == f["ggml_type"]
        assert registry.format_of_type(f["ggml_name"]) == f["name"]
        assert f["bits_per_weight"] == 8 * f["block_bytes"] / f["block_elements"], f
        costs = info(ctx, "--costs", "--shape", "tinyllama-1.1b", "--dtype", f["name"])
        q = next(t for t in costs["tensors"] if t["name"] == "blk.0.attn_q.weight")
        assert q["format"] == f["name"] and q["bytes"] == q["rows"] * registry.row_bytes(f["name"], q["cols"]), (f, q)


def test_roofline_sizes_are_what_quantize_writes(ctx):
    source = tiny_model(ctx)
    shape = roofline.model_shape(measure.model_info(ctx.cpullm, source), ctx.cpullm)
    mixtures = ["q4_k_m", "q3_k_m", "q5_k_m"]  # llama.cpp's mixtures, beyond the registry's formats
    for fmt in [f["name"] for f in info(ctx, "--formats")["formats"]] + mixtures:
        out = os.path.join(ctx.workdir, f"tiny-as-{fmt}.gguf")
        run([ctx.cpullm, "quantize", source, out, "--type", fmt])
        written = {t["name"]: (roofline.registry.format_of_type(t["type"]), t["bytes"]) for t in info(ctx, out)["tensors"]}
        predicted = {name: (f, size) for name, _, _, f, size in roofline.tensor_formats(shape, fmt)}
        assert predicted == written, (fmt, {k: (predicted[k], written[k]) for k in written if predicted.get(k) != written[k]})


def test_costs_agree_with_the_file_and_the_formulas(ctx):
    source = tiny_model(ctx)
    costs = info(ctx, source, "--costs", "--position", "10")
    whole = info(ctx, source)
    assert sum(t["bytes"] for t in costs["tensors"]) == whole["totals"]["bytes"]
    d, ops = costs["dims"], costs["decode_token"]["ops"]
    assert (d["n_layers"], d["dim"], d["ffn_dim"], d["kv_dim"], d["vocab_size"]) == (2, 64, 80, 32, 1000), d
    assert ops["q_proj"]["flops"] == 2 * 64 * 64 * 2 and ops["k_proj"]["flops"] == 2 * 32 * 64 * 2
    assert ops["ffn_down"]["flops"] == 2 * 64 * 80 * 2 and ops["lm_head"]["flops"] == 2 * 1000 * 64
    # attention at position 10: 11 keys per head, 4 x head_dim + 5 FLOPs each, per layer
    assert ops["attention"]["flops"] == 2 * 4 * 11 * (4 * 16 + 5), ops["attention"]
    assert costs["decode_token"]["flops"] == sum(o["flops"] for o in ops.values())
    # and reads the 11 cached keys and values of kv_dim 32 per layer in the cache's type, with the
    # query and output in FP32 (2 x 64 floats)
    for kv_type, per_value in (("f32", 4), ("f16", 2), ("q8_0", 34 / 32)):
        attention = info(ctx, source, "--costs", "--position", "10", "--kv-type", kv_type)["decode_token"]["ops"]["attention"]
        assert attention["bytes"] == 2 * (11 * 2 * 32 * per_value + 2 * 64 * 4), (kv_type, attention)
    assert costs["decode_token"]["kv_type"] == "f16"  # the default
    matrices = sum(t["bytes"] for t in costs["tensors"] if t["rows"] > 1 and t["name"] != "token_embd.weight")
    projected = sum(ops[k]["bytes"] for k in ("q_proj", "k_proj", "v_proj", "o_proj", "ffn_gate", "ffn_up", "ffn_down", "lm_head"))
    assert projected > matrices and projected - matrices < 64 * 1024, (projected, matrices)  # the weights plus FP32 activations


def test_predict_shapes_are_the_binarys(ctx):
    shape = predict.llama_shape("llama-7b")
    assert (shape.layers, shape.dim, shape.kv_dim, shape.vocab) == (32, 4096, 4096, 32000)
    assert predict.parameters("llama-7b") == 2 * 32000 * 4096 + 32 * (4 * 4096 ** 2 + 3 * 4096 * 11008 + 2 * 4096) + 4096


def test_space_takes_every_format(ctx):
    names = registry.format_names()
    path = os.path.join(ctx.workdir, "every.json")
    with open(path, "w") as f:
        json.dump({"values": {"format": names}}, f)
    assert sp.load_space(path)["values"]["format"] == names
    topology = {"nodes": [{"os_index": 0}], "cores": [{"node": 0, "pus": [0]}, {"node": 0, "pus": [1]}]}
    bits = registry.format_bits()
    for source in names:
        kept, dropped = sp.constrain([{"format": f} for f in names], topology, source, set())
        assert {p["format"] for p in kept} == {f for f in names if bits[f] <= bits[source]}, (source, kept, dropped)


def test_kv_types_are_the_binarys(ctx):
    """registry.kv_type_names() is `info --formats --json`'s list, with Q8_0 at llama.cpp's 34 bytes a
    block of 32; the sweep space takes each and refuses another name; bench's --kv-type and the
    report's workload check against the same list."""
    binary = info(ctx, "--formats")["kv_types"]
    assert registry.kv_type_names() == [t["name"] for t in binary] == ["f32", "f16", "bf16", "q8_0"], binary
    assert {t["name"]: t["bytes_per_value"] for t in binary}["q8_0"] == 34 / 32
    path = os.path.join(ctx.workdir, "kv.json")
    for values, ok in ((registry.kv_type_names(), True), (["q4_0"], False)):
        with open(path, "w") as f:
            json.dump({"values": {"kv_type": values}}, f)
        try:
            assert sp.load_space(path)["values"]["kv_type"] == values and ok
        except sp.SpaceError as e:
            assert not ok and "q4_0" in str(e), e
    expect_error([ctx.cpullm, "bench", "-m", tiny_model(ctx), "--kv-type", "q4_0", "-p", "0", "-n", "1"], "f32, f16, bf16, q8_0")


def test_sweep_runs_every_format(ctx):
    names = registry.format_names()
    space = os.path.join(ctx.workdir, "formats.toml")
    with open(space, "w") as f:
        f.write("[values]\nformat = [" + ", ".join(f'"{n}"' for n in names) + "]\n[workload]\nprompt = 8\ngen = 4\n")
    out_dir = os.path.join(ctx.workdir, "sweep")
    proc = run([ctx.cpullm, "sweep", "-m", tiny_model(ctx), "--space", space, "--strategy", "grid", "--budget", "10m",
                "--out", out_dir, "--point-budget", "2", "--min-reps", "1", "--max-reps", "1", "--confirm-reps", "1"],
               timeout=900)
    assert "KeyError" not in proc.stderr, proc.stderr
    assert proc.stderr.count(" measured, ") == len(names), proc.stderr
    table = open(os.path.join(out_dir, "sweep-table.md")).read()
    for n in names:
        assert f"format={n}" in table, (n, table)

