"""llama.cpp's quantized files (shared kquants/: the K-quant mixtures, Q4_1, Q5_0, Q5_1) through
every command that reads a model: `info` lists each file's types, `generate` and `bench` run
them, and `eval-quant` scores each file type quantized by cpullm against the F32 source.
Their logits are checked against numpy in test_logits_vs_numpy.py, their tensors and
`quantize`'s bytes against llama.cpp's in test_llama_cpp_files.cpp.
Skipped without the shared models.
"""
import json
import os

import pytest

from cli_checks import run
from gguf_reader import GGUFFile  # the independent reader, written from the GGUF spec

FILES = {"kq-q2_k": "q2_k", "kq-q3_k_m": "q3_k_m", "kq-q4_k_s": "q4_k_s", "kq-q4_k_m": "q4_k_m",
         "kq-q5_k_m": "q5_k_m", "kq-q6_k": "q6_k", "kq-q4_1": "q4_1", "kq-q5_0": "q5_0", "kq-q5_1": "q5_1"}
GGML_NAMES = {0: "F32", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K",
              14: "Q6_K"}


def kquants(ctx, name):
    path = os.path.join(ctx.shared, "kquants", f"{name}.gguf")
    if not os.path.isfile(path):
        pytest.skip(f"{path} not found")
    return path


@pytest.mark.parametrize("name", FILES)
def test_info_lists_the_types(ctx, name):
    path = kquants(ctx, name)
    info = json.loads(run([ctx.cpullm, "info", path, "--json"]).stdout)
    types = {t["name"]: t["type"] for t in info["tensors"]}
    expected = {n: GGML_NAMES[t] for n, (_, t, _) in GGUFFile(path).tensors.items()}
    assert types == expected


@pytest.mark.parametrize("name", FILES)
def test_generate_and_bench_run(ctx, name):
    path = kquants(ctx, name)
    out = run([ctx.cpullm, "generate", "-m", path, "-p", "Once upon a time", "-n", "8", "--temp", "0", "-t", "2"])
    assert "generated 8 tokens" in out.stderr and out.stdout.startswith("Once upon a time"), out.stderr
    rows = json.loads(run([ctx.cpullm, "bench", "-m", path, "-p", "32", "-n", "8", "-r", "1", "-t", "2", "-o", "json"]).stdout)
    assert [r["n_prompt"] for r in rows] == [32, 0] and all(r["avg_ts"] > 0 for r in rows), rows


def test_eval_quant_scores_every_file_type(ctx):
    source = kquants(ctx, "kq-f32")
    formats = ",".join(FILES.values())
    scores = json.loads(run([ctx.cpullm, "eval-quant", "-m", source, "--formats", formats, "--window", "32", "-t", "2",
                             "--json"], timeout=540).stdout)  # nine quantizations and scorings: slow on busy cores
    by_format = {s["format"]: s for s in scores}
    assert set(by_format) == {"source", *FILES.values()}
    # Random weights: the figures say only that each file type was scored, and that more bits
    # stay closer to the source.
    assert by_format["q6_k"]["mean_kl"] < by_format["q4_k_m"]["mean_kl"] < by_format["q2_k"]["mean_kl"], by_format
