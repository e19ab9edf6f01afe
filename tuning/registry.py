"""What the engine knows, read from the binary instead of restated here: the weight formats and
the KV cache's types (`cpullm info --formats --json`: the format registry,
engine/kernels/weight_formats.cpp, and engine/model/kv_cache.cpp) and a
model's LLaMA tensors and per-op costs (`cpullm info MODEL --costs --json`). Each is read once per
process and binary (the binary's own facts cannot change while it runs)."""
import functools
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def default_cpullm():
    """$CPULLM_BIN, else the repository's build/cpullm."""
    return os.environ.get("CPULLM_BIN") or os.path.join(os.path.dirname(HERE), "build", "cpullm")


class RegistryError(Exception):
    """The binary could not be asked: the message names it and what it said."""


def _info(cpullm, *args):
    try:
        done = subprocess.run([cpullm, "info", *args, "--json"], capture_output=True, text=True)
    except OSError as e:
        raise RegistryError(f"{cpullm}: cannot run it to read the format registry ({e}); build it, or set CPULLM_BIN")
    if done.returncode != 0:
        raise RegistryError(f"{cpullm} info {' '.join(args)}: {done.stderr.strip()}")
    return json.loads(done.stdout)


@functools.lru_cache(maxsize=None)
def formats(cpullm=None):
    """{name: entry} of every weight format, in the registry's order. An entry has name,
    ggml_type (number), ggml_name, block_elements, block_bytes, row_bytes_extra, row_group,
    bits_per_weight, activations (f32 | q8_0), plain (the _R8 types' plain format), output_layer
    (what quantize gives the output layer), llama_file_type, gemm (f32 | integer | sub-blocks | none) and
    gemm_nibbles."""
    return {f["name"]: f for f in _info(cpullm or default_cpullm(), "--formats")["formats"]}


@functools.lru_cache(maxsize=None)
def kv_type_names(cpullm=None):
    """The types a KV cache can hold (--kv-type), in the binary's order (engine/model/kv_cache.cpp)."""
    return [t["name"] for t in _info(cpullm or default_cpullm(), "--formats")["kv_types"]]


def format_names(cpullm=None):
    return list(formats(cpullm))


def format_bits(cpullm=None):
    """{name: bits per weight}."""
    return {name: f["bits_per_weight"] for name, f in formats(cpullm).items()}


def ggml_type(name, cpullm=None):
    """The ggml type number of a format name (bench_kernels' arguments)."""
    return formats(cpullm)[name]["ggml_type"]


def format_of_type(type_name, cpullm=None):
    """The format name of a ggml type name as `cpullm info` prints it ("CPULLM_Q4_0_R8" -> "q4_0-r8");
    a type cpullm does not run keeps ggml's name, in lower case."""
    return next((f["name"] for f in formats(cpullm).values() if f["ggml_name"] == type_name), type_name.lower())


def row_bytes(name, cols, cpullm=None):
    """Bytes of one row of `cols` values (a whole number of blocks) in the format."""
    f = formats(cpullm)[name]
    return cols // f["block_elements"] * f["block_bytes"] + f["row_bytes_extra"]


@functools.lru_cache(maxsize=None)
def costs(model=None, shape=None, dtype=None, keep="", position=0, sequences=1, cpullm=None):
    """`cpullm info --costs`: a model file's (or a named shape's) dims, LLaMA tensors (name, role,
    rows, cols, type, format, bytes), one decoded token's FLOPs and bytes per op at `position`
    cached positions, and the parallel loops of a decode step of `sequences` sequences
    (decode_step.parallel_loops). With dtype (and keep) the tensors are as `cpullm quantize --type
    dtype --keep keep` writes them, by quantize's own plan; a named shape without dtype is at f16."""
    args = [model] if model else ["--shape", shape]
    if dtype:
        args += ["--dtype", dtype] + (["--keep", keep] if keep else [])
    return _info(cpullm or default_cpullm(), *args, "--costs", "--position", str(position), "--sequences", str(sequences))
