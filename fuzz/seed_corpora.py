#!/usr/bin/python3
"""Writes the seed inputs of every fuzz target into OUT/<target>/, from cpullm's own synthetic
models (gen-model at tiny custom shapes, then quantize), the shared models where present, the
tokenizer fixtures and the syntax each reader is documented to take. Nothing here is committed:
scripts/fuzz runs this before each fuzzing run.

  seed_corpora.py --cpullm build/cpullm --out build-fuzz/seeds [--shared DIR]
"""
import argparse
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write(folder, name, data):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def gguf_seeds(cpullm, out, shared):
    """Tiny models, one per weight type and layout the loader handles, then the shared ones."""
    folder = out / "gguf_model"
    folder.mkdir(parents=True, exist_ok=True)
    tiny = ["--shape", "custom", "--layers", "1", "--dim", "16", "--ffn", "32", "--heads", "2", "--vocab", "360",
            "--ctx", "32"]
    run = lambda *args: subprocess.run([cpullm, *map(str, args)], check=True, capture_output=True)
    run("gen-model", *tiny, "--dtype", "f16", "-o", folder / "tiny-f16.gguf")
    run("gen-model", *tiny, "--dtype", "f32", "--kv-heads", "1", "--tied-output", "-o", folder / "tiny-f32-tied-gqa.gguf")
    run("gen-model", *tiny, "--dtype", "bf16", "-o", folder / "tiny-bf16.gguf")
    # Quantized rows are 32 elements a block; the r8 layouts interleave 8 rows.
    wide = ["--shape", "custom", "--layers", "1", "--dim", "32", "--ffn", "64", "--heads", "2", "--vocab", "360",
            "--ctx", "32"]
    run("gen-model", *wide, "--dtype", "f32", "-o", out / "wide-f32.gguf")
    for kind in ["q8_0", "q4_0", "q8_0-r8", "int8-channel"]:
        run("quantize", out / "wide-f32.gguf", folder / f"wide-{kind}.gguf", "--type", kind)
    (out / "wide-f32.gguf").unlink()
    for name in ["stories260K.gguf", "stories260K-q8_0.gguf", "stories260K-q4_0.gguf"]:
        if shared and (shared / name).exists():
            shutil.copyfile(shared / name, folder / name)


def tokenizer_seeds(out, shared):
    """Each text once per vocabulary (the first byte's low bits, fuzz/tokenizer.cpp), with and
    without BOS, and with special tokens parsed for the two BPE vocabularies."""
    texts = ["Hello world", " Hello  world\n", "Once upon a time, there was a little girl.", "\u00e9\u20ac\U0001f999",
             "\xff\xfe invalid \xc3", "<|begin_of_text|>Hi<|eot_id|>", "<|im_start|>user\nHi<|im_end|>[PAD151650]",
             "<s>text</s>", "It's 12345 o'clock!!\n\n  \t x"]
    if shared:
        for name in ["ggml-vocab-llama-spm.gguf.inp", "ggml-vocab-llama-bpe.gguf.inp"]:  # Qwen2's inputs are the same
            if (shared / name).exists():
                texts += (shared / name).read_text(errors="surrogateescape").split("\n__ggml_vocab_test__\n")
    texts += (ROOT / "suites/data/eval_stories.txt").read_text().splitlines()[:20]
    folder = out / "tokenizer"
    firsts = {"stories": 0, "llama-bos": 1 | 4, "llama3-bos": 2 | 4, "qwen2": 3, "llama3-special": 2 | 8,
              "qwen2-special": 3 | 8}
    for i, text in enumerate(texts):
        data = text.encode(errors="surrogateescape")
        for name, first in firsts.items():
            write(folder, f"text-{i}-{name}", bytes([first]) + data)


def config_seeds(out):
    """What the sweep writes (tuning/results.py), and the TOML forms a config file may use."""
    folder = out / "config_file"
    write(folder, "sweep-best", '# best tokens/s\nmodel = "m.gguf"\nthreads = "2"\n\n[bench]\nbatch-size = "64"\n')
    write(folder, "lists", 'threads = ["1", "2"]\nrepetitions = 3\ncold = true\noutput = "json"\n')
    write(folder, "section", "[bench]\nthreads = '4'\n# comment\nrepetitions = 2\n")
    write(folder, "quoted", 'threads = """2"""\n"output" = \'csv\'\ncold = false\n')
    write(folder, "nested", "[bench.extra]\nthreads = [1, [2]]\n")


def value_list_seeds(out):
    """Each syntax of docs/bench.md; the first byte picks the bounds (see fuzz/value_lists.cpp)."""
    folder = out / "value_lists"
    for i, text in enumerate(["1,2,4", "64-512*2", "1-8+3", "4-6,0", "16-100*4", "512,128", "none,scatter",
                              "-1", "1-", "2-1", "1-1048576*2", "0-4096+1024"]):
        write(folder, f"list-{i}", bytes([i % 3]) + text.encode())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpullm", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--shared", type=Path, default=os.environ.get("CPULLM_SHARED_MODELS"))
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    gguf_seeds(args.cpullm, args.out, args.shared)
    tokenizer_seeds(args.out, args.shared)
    config_seeds(args.out)
    value_list_seeds(args.out)
    for target in sorted(p for p in args.out.iterdir() if p.is_dir()):
        files = list(target.iterdir())
        print(f"seed_corpora: {target.name}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")


if __name__ == "__main__":
    main()
