"""`cpullm eval-quant`'s figures recomputed by the independent numpy model (tests/reference).

On stories260K and the first story of the project's evaluation text, in windows of 64 tokens:
the numpy model reads each file `eval-quant --files` wrote (its own decoders of Q8_0, Q4_0 and
per-channel INT8; integer matrices meet Q8_0-quantized inputs, as the engine's kernels do) and
computes the perplexity, the mean KL divergence from the source and the top-1 agreement the
same way: windows of BOS + 63 text tokens, each window a fresh context, every position
predicting the next token. The text's token ids come from `cpullm logits` (BOS first).

Tolerances, and why: the engine computes in float32 and numpy in float64. For the float formats
that is the whole difference (perplexity within 1e-5 relative, KL within 1e-6 + 1e-3 relative).
For the integer formats an input that float32 puts on the other side of a rounding step of the
activation quantization flips one int8 value, which moves the logits of that and later positions
by up to ~0.3 (perturbing numpy's own inputs by 1e-6 relative does the same). Measured on this
text: perplexity within 0.14%, KL within 0.4%, top-1 agreement equal; the test allows 0.5%, 5% and
3 positions in 100. Numpy without the activation quantization puts Q8_0's KL at half the
engine's, so the 5% does tell the two apart.
Skipped without the model.
The engine runs with an F32 KV cache (`--kv-type f32`), the numpy model's.
"""
import json
import os
import subprocess

import numpy as np

import pytest

from llama_reference import LlamaModel, forward

WINDOW = 64
FORMATS = ("bf16", "q8_0", "q4_0", "int8-channel")
FLOAT_FORMATS = ("source", "bf16")
TEXT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "suites", "data", "eval_stories.txt")


def log_softmax(logits):
    """[T, vocab] -> log-probabilities, in float64."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def numpy_scores(paths, bos, text_tokens):
    """eval-quant's figures for each model in `paths` (the source first), from numpy."""
    models = {name: LlamaModel(path) for name, path in paths.items()}
    nll = {name: 0.0 for name in paths}
    kl = {name: 0.0 for name in paths}
    agree = {name: 0 for name in paths}
    positions = 0
    for start in range(0, len(text_tokens) - 1, WINDOW - 1):
        window = [bos] + text_tokens[start:start + WINDOW - 1]
        n = len(window) - 1
        targets = np.asarray(window[1:])
        source = None
        for name, model in models.items():
            lp = log_softmax(forward(model, window)[:n])  # [n, vocab]
            if source is None:
                source = lp
            nll[name] -= lp[np.arange(n), targets].sum()
            kl[name] += (np.exp(source) * (source - lp)).sum()
            agree[name] += int((lp.argmax(axis=1) == source.argmax(axis=1)).sum())
        positions += n
    return {name: {"positions": positions, "perplexity": float(np.exp(nll[name] / positions)),
                   "mean_kl": kl[name] / positions, "top1_agreement": agree[name] / positions} for name in paths}


@pytest.fixture(scope="module")
def scores(ctx):
    """(engine's rows by format, numpy's scores by format) on the first story of the text."""
    source = os.path.join(ctx.shared, "stories260K.gguf")
    if not os.path.isfile(source):
        pytest.skip(f"{source} not found")
    text = open(TEXT, encoding="utf-8").read().split("\n\n")[0]  # the first story: 135 tokens
    text_path = os.path.join(ctx.workdir, "text.txt")
    with open(text_path, "w", encoding="utf-8") as f:
        f.write(text)
    run = lambda cmd: subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    engine = json.loads(run([ctx.cpullm, "eval-quant", "-m", source, "--formats", ",".join(FORMATS), "--text", text_path,
                             "--window", str(WINDOW), "--files", ctx.workdir, "--kv-type", "f32", "--json"]))
    logits_out = run([ctx.cpullm, "logits", "-m", source, "-p", text, "-o", os.path.join(ctx.workdir, "text.npy")])
    ids = next([int(t) for t in line[len("tokens:"):].split()] for line in logits_out.splitlines() if line.startswith("tokens:"))
    paths = {"source": source, **{name: os.path.join(ctx.workdir, f"{name}.gguf") for name in FORMATS}}
    return {row["format"]: row for row in engine}, numpy_scores(paths, ids[0], ids[1:])


@pytest.mark.parametrize("name", ("source",) + FORMATS)
def test_engine_scores_match_numpy(scores, name):
    engine, reference = scores
    row, ref = engine[name], reference[name]
    exact = name in FLOAT_FORMATS
    print(f"{name}: perplexity {row['perplexity']:.5f} (numpy {ref['perplexity']:.5f}), mean KL {row['mean_kl']:.6f} "
          f"({ref['mean_kl']:.6f}), top-1 {row['top1_agreement']:.3f} ({ref['top1_agreement']:.3f}) over {row['positions']} positions")
    assert row["positions"] == ref["positions"]
    assert abs(row["perplexity"] / ref["perplexity"] - 1) <= (1e-5 if exact else 5e-3), "perplexity"
    assert abs(row["mean_kl"] - ref["mean_kl"]) <= (1e-6 + 1e-3 * ref["mean_kl"] if exact else 0.05 * ref["mean_kl"]), "mean KL"
    assert abs(row["top1_agreement"] - ref["top1_agreement"]) <= (0 if exact else 0.03), "top-1 agreement"
