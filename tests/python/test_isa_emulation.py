"""One binary for every CPU: cpullm runs on an emulated AVX2-only CPU (qemu-user's Broadwell,
the Xeon E5 v4's core, which has no AVX-512) and gives the same tokens as the AVX2 kernels on
this machine. A binary that used AVX-512 outside the dispatched kernels would die of SIGILL.

Checks, for stories260K in F32, llama.cpp's Q8_0 and Q4_0, cpullm's Q8_0 and Q4_0 with rows
interleaved in eights (`quantize --type q8_0-r8`, `q4_0-r8`, written to a temporary folder), and
llama.cpp's files of the small K-quant model (kquants/: the K-quants, Q4_1, Q5_0, Q5_1, whose
AVX-512 row kernels share their names with the AVX2 ones):
  - under `qemu-x86_64 -cpu Broadwell` the kernels pick avx2 by themselves;
  - greedy generation there equals `CPULLM_ISA=avx2` on the host, token for token, from BOS alone
    (every step through the row kernels) and from a 32-token prompt (its prefill through the
    blocked GEMM's AVX2 tiles and packing: more than 8 tokens never stream, matmul.cpp);
  - for F32 that text is the known-good story;
  - forcing avx512 under Broadwell is a clear error, not a crash.

Skipped without qemu-user or the models.
"""
import os
import shutil
import subprocess

import pytest

QEMU = ["qemu-x86_64", "-cpu", "Broadwell"]
PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."


def generate(cmd, model, isa=None, prompt=None):
    env = {k: v for k, v in os.environ.items() if k != "CPULLM_ISA"}
    if isa:
        env["CPULLM_ISA"] = isa
    args = ["generate", "-m", model, "--temp", "0", "-t", "2"]
    args += ["-p", prompt, "-n", "40"] if prompt else ["-n", "200"]
    return subprocess.run(cmd + args, capture_output=True, text=True, env=env, timeout=600)


STORIES = ("stories260K", "stories260K-q8_0", "stories260K-q4_0", "stories260K-q8_0-r8", "stories260K-q4_0-r8")
KQUANTS = ("kq-q2_k", "kq-q3_k_m", "kq-q4_k_m", "kq-q4_k_s", "kq-q5_k_m", "kq-q6_k", "kq-q4_1", "kq-q5_0", "kq-q5_1")
MODELS = STORIES + KQUANTS


@pytest.fixture(scope="module")
def models(ctx):
    """Model name -> path: the shared files, and the interleaved layouts quantized from F32."""
    if not shutil.which(QEMU[0]):
        pytest.skip("qemu-x86_64 not installed (Debian package qemu-user; scripts/setup installs it)")
    paths = {name: os.path.join(ctx.shared, f"{name}.gguf") for name in STORIES[:3]}
    paths |= {name: os.path.join(ctx.shared, "kquants", f"{name}.gguf") for name in KQUANTS}
    missing = [p for p in paths.values() if not os.path.isfile(p)]
    if missing:
        pytest.skip(f"models not found: {', '.join(missing)}")
    for layout in ("q8_0-r8", "q4_0-r8"):
        paths[f"stories260K-{layout}"] = os.path.join(ctx.workdir, f"stories260K-{layout}.gguf")
        subprocess.run([ctx.cpullm, "quantize", paths["stories260K"], paths[f"stories260K-{layout}"], "--type", layout],
                       check=True, capture_output=True, timeout=120)
    return paths


@pytest.mark.parametrize("prompt", (None, PROMPT), ids=("from-bos", "with-prompt"))
@pytest.mark.parametrize("name", MODELS)
def test_broadwell_picks_avx2_and_matches_the_host(ctx, models, name, prompt):
    emulated = generate(QEMU + [ctx.cpullm], models[name], prompt=prompt)
    host = generate([ctx.cpullm], models[name], "avx2", prompt)
    assert emulated.returncode == 0, f"exit {emulated.returncode} under Broadwell: {emulated.stderr.strip()[-300:]}"
    assert "kernels avx2" in emulated.stderr, f"Broadwell did not select avx2: {emulated.stderr.strip().splitlines()[-1]}"
    assert emulated.stdout == host.stdout, "tokens differ from the host's avx2 run"
    if name == "stories260K" and not prompt:
        readme = open(os.path.join(ctx.shared, "README.md"), encoding="utf-8").read()
        known = readme[readme.index("## Known-good output"):].split("```\n", 1)[1].split("\n```", 1)[0]
        assert emulated.stdout == known + "\n", "F32 text is not the known-good story"


def test_forcing_avx512_under_broadwell_is_an_error(ctx, models):
    forced = generate(QEMU + [ctx.cpullm], models["stories260K"], "avx512")
    assert forced.returncode == 1 and "cannot run the avx512 kernels" in forced.stderr, forced.stderr
