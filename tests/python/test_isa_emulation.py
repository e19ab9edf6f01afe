#!/usr/bin/python3
"""One binary for every CPU: cpullm runs on an emulated AVX2-only CPU (qemu-user's Broadwell,
the Xeon E5 v4's core, which has no AVX-512) and gives the same tokens as the AVX2 kernels on
this machine. A binary that used AVX-512 outside the dispatched kernels would die of SIGILL.

Checks, for stories260K in F32, llama.cpp's Q8_0 and Q4_0, and cpullm's Q8_0 and Q4_0 with rows
interleaved in eights (`quantize --type q8_0-r8`, `q4_0-r8`, written to a temporary folder):
  - under `qemu-x86_64 -cpu Broadwell` the kernels pick avx2 by themselves;
  - greedy generation there equals `CPULLM_ISA=avx2` on the host, token for token, from BOS alone
    (every step through the row kernels) and from a 32-token prompt (its prefill through the
    blocked GEMM's AVX2 tiles and packing: more than 8 tokens never stream, matmul.cpp);
  - for F32 that text is the known-good story;
  - forcing avx512 under Broadwell is a clear error, not a crash.

Usage: test_isa_emulation.py --cpullm BIN --shared DIR
Exit 77 (ctest: skipped) without qemu-user or the models.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

QEMU = ["qemu-x86_64", "-cpu", "Broadwell"]
SKIPPED = 77
PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."


def generate(cmd, model, isa=None, prompt=None):
    env = {k: v for k, v in os.environ.items() if k != "CPULLM_ISA"}
    if isa:
        env["CPULLM_ISA"] = isa
    args = ["generate", "-m", model, "--temp", "0", "-t", "2"]
    args += ["-p", prompt, "-n", "40"] if prompt else ["-n", "200"]
    return subprocess.run(cmd + args, capture_output=True, text=True, env=env, timeout=600)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpullm", required=True)
    ap.add_argument("--shared", required=True)
    args = ap.parse_args()
    if not shutil.which(QEMU[0]):
        print("SKIP: qemu-x86_64 not installed (Debian package qemu-user; scripts/setup installs it)")
        return SKIPPED
    models = [os.path.join(args.shared, f"stories260K{suffix}.gguf") for suffix in ("", "-q8_0", "-q4_0")]
    if not all(os.path.isfile(m) for m in models):
        print(f"SKIP: stories260K models not found in {args.shared}")
        return SKIPPED
    readme = open(os.path.join(args.shared, "README.md"), encoding="utf-8").read()
    known = readme[readme.index("## Known-good output"):].split("```\n", 1)[1].split("\n```", 1)[0]

    scratch = tempfile.TemporaryDirectory()
    for layout in ("q8_0-r8", "q4_0-r8"):
        interleaved = os.path.join(scratch.name, f"stories260K-{layout}.gguf")
        subprocess.run([args.cpullm, "quantize", models[0], interleaved, "--type", layout], check=True,
                       capture_output=True, timeout=120)
        models.append(interleaved)

    failed = checks = 0
    for model, prompt in [(m, p) for m in models for p in (None, PROMPT)]:
        emulated = generate(QEMU + [args.cpullm], model, prompt=prompt)
        host = generate([args.cpullm], model, "avx2", prompt)
        name = os.path.basename(model) + (" with a prompt" if prompt else "")
        checks += 1
        problems = []
        if emulated.returncode != 0:
            problems.append(f"exit {emulated.returncode} under Broadwell: {emulated.stderr.strip()[-300:]}")
        elif "kernels avx2" not in emulated.stderr:
            problems.append(f"Broadwell did not select avx2: {emulated.stderr.strip().splitlines()[-1]}")
        if emulated.stdout != host.stdout:
            problems.append("tokens differ from the host's avx2 run")
        if model == models[0] and not prompt and emulated.stdout != known + "\n":
            problems.append("F32 text is not the known-good story")
        print(("FAIL " if problems else "PASS ") + name + (": " + "; ".join(problems) if problems else ""))
        failed += bool(problems)

    forced = generate(QEMU + [args.cpullm], models[0], "avx512")
    ok = forced.returncode == 1 and "cannot run the avx512 kernels" in forced.stderr
    print(("PASS" if ok else "FAIL") + f" forcing avx512 under Broadwell: exit {forced.returncode}, "
          f"{forced.stderr.strip().splitlines()[-1] if forced.stderr.strip() else ''}")
    failed += not ok
    print(f"{checks + 1 - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
