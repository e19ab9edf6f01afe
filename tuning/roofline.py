"""Roofline predictions of prefill (time to first token) and decode (tokens/s) from a model's
shape and a machine's roofs. Predictions, not measurements: every input is returned with them.

Decode reads every weight once per step (the embedding table: one row per token) and each
sequence's KV cache at its KV type; a step of B sequences also does B tokens of FLOPs, and pays
a fork/join for each of its parallel loops. Prefill of P tokens does 2 x parameters x P FLOPs
plus attention (P^2 / 2 query-key pairs per layer, 4 x dim FLOPs each), and reads the weights
once per 512-token chunk. Each phase takes the longer of its memory time and its compute time.

For another box the roofs (`Roofs`) come from a hardware profile, its ranged figures at a corner
of their ranges: bandwidth, per format the GEMM rate (prefill; FLOP/s) at the sustained all-core
clock, and a parallel loop's fork/join cost. On this machine (`tune --hardware host`) the model is finer, since
its inputs can be measured: each matrix takes its bytes over the rate of its format at the
step's tokens, measured on a model-shaped layer as the engine runs that many tokens (decode: one
token per sequence decoded together; prefill: a prompt chunk's tokens), at the point's thread
count (`KernelRates`, from bench_kernels' matvec_decode), and everything that is not a matrix product (attention, norms, RoPE, the
activation, embedding, sampling, the serial parts) takes the time a calibration run of `cpullm
profile` measured for it (`Overhead`), per sequence where it grows with them.
"""
import fnmatch
import math
from dataclasses import dataclass, field

from . import registry  # the formats' block layouts and quantize's choices: the binary's registry

CHUNK = 512  # prompt tokens per forward_batch call: the weights are read once per chunk


@dataclass
class Shape:
    layers: int
    dim: int
    kv_dim: int  # dim x kv_heads / heads
    vocab: int
    tensors: list  # (name, rows, cols, format, bytes) of the file as it is
    model: str = None  # the GGUF file it was read from, or
    name: str = None   # the named shape (`cpullm info --costs --shape NAME`); neither: built by hand
    cpullm: str = None  # the binary that read it, which also plans its quantization


def model_shape(info, cpullm=None):
    """The shape from `cpullm info --json` (the header only: any size works)."""
    meta = {k: v["value"] for k, v in info["metadata"].items()}
    arch = meta.get("general.architecture", "llama")  # llama or qwen2: the keys are {arch}.*
    heads = meta[f"{arch}.attention.head_count"]
    kv_heads = meta.get(f"{arch}.attention.head_count_kv", heads)
    dim = meta[f"{arch}.embedding_length"]
    tensors = [(t["name"], t["shape"][1] if len(t["shape"]) > 1 else 1, t["shape"][0],
                registry.format_of_type(t["type"]), t["bytes"]) for t in info["tensors"]]
    vocab = next(rows for name, rows, *_ in tensors if name == "token_embd.weight")
    return Shape(meta[f"{arch}.block_count"], dim, dim * kv_heads // heads, vocab, tensors, model=info["file"], cpullm=cpullm)


def costs_tensors(costs):
    """(name, rows, cols, format, bytes) of `cpullm info --costs --json`'s tensors."""
    return [(t["name"], t["rows"], t["cols"], t["format"] or t["type"].lower(), t["bytes"]) for t in costs["tensors"]]


def named_shape(name, cpullm=None):
    """A named LLaMA shape (`cpullm info --costs --shape NAME`), its matrices at F16 as gen-model
    writes them."""
    d = registry.costs(shape=name, cpullm=cpullm)["dims"]
    return Shape(d["n_layers"], d["dim"], d["kv_dim"], d["vocab_size"],
                 costs_tensors(registry.costs(shape=name, cpullm=cpullm)), name=name, cpullm=cpullm)


def kept(name, keep, layers):
    """Whether `quantize --keep LIST` leaves this tensor at its source type."""
    for item in filter(None, keep.split(",")):
        if (item == "first" and name.startswith("blk.0.")) or (item == "last" and name.startswith(f"blk.{layers - 1}.")) \
                or (item == "embeddings" and name == "token_embd.weight") or (item == "output" and name == "output.weight") \
                or fnmatch.fnmatch(name, item):
            return True
    return False


def tensor_formats(shape, fmt, keep=""):
    """(name, rows, cols, format, bytes) of every tensor after `quantize --type fmt --keep keep`
    (fmt None: the model as it is). The binary plans it (`cpullm info --costs --dtype`), by
    quantize's own rules: mixtures, the output layer, fallbacks for rows that are not whole blocks.
    A shape built by hand (the tests' arithmetic) has no binary behind it: it stands for the
    model already in the format asked for, and is read as it is."""
    if (fmt is None and not keep) or (shape.model is None and shape.name is None):
        return list(shape.tensors)
    return costs_tensors(registry.costs(model=shape.model, shape=shape.name, dtype=fmt, keep=keep, cpullm=shape.cpullm))


def tensor_bytes(shape, fmt, keep=""):
    """(name, bytes) of every tensor after quantizing (tensor_formats)."""
    return [(name, size) for name, _, _, _, size in tensor_formats(shape, fmt, keep)]


def matrix_params(shape):
    """Multiply-adds per token: every matrix but the embedding table, which is a lookup
    (unless the output is tied to it, when it is also the output layer)."""
    has_output = any(name == "output.weight" for name, *_ in shape.tensors)
    return sum(rows * cols for name, rows, cols, *_ in shape.tensors
               if rows > 1 and (name != "token_embd.weight" or not has_output))


@dataclass
class Roofs:
    bandwidth_gbs: float  # weights' read bandwidth, GB/s, all threads in use
    gemm_gflops: dict = field(default_factory=dict)  # format -> prefill GEMM rate, GFLOP/s
    remote_fraction: float = 0.0  # share of weight bytes read across sockets (NUMA strategy)
    link_gbs: float = math.inf  # cross-socket bandwidth available to those reads, GB/s
    fork_join_s: float = 0.0  # one parallel loop's hand-out and join over all the threads (fork_join_seconds)
    source: str = ""  # where the figures come from, printed with the predictions


# A profile figure's value is a number or a range [low, high] (docs/tuning.md). A prediction runs
# at one corner of its inputs' ranges: "low" takes the end of each range that makes it slower,
# "high" the end that makes it faster, "mid" the middle; the low and high corners bound it.
CORNERS = ("low", "mid", "high")


def span(value):
    """(low, high) of a figure's value: a number, or a range [low, high]."""
    return (value[0], value[1]) if isinstance(value, (list, tuple)) else (value, value)


def at(value, corner, faster_when_higher=True):
    """A figure's value at a prediction corner."""
    low, high = span(value)
    if corner == "mid":
        return (low + high) / 2
    return high if (corner == "high") == faster_when_higher else low


def clock_field(profile):
    """The profile's sustained all-core clock at its kernels' vector width: AVX-512 where its
    level is avx512, else AVX2 (the base clock is what the part guarantees, not what it runs)."""
    return "avx512_clock_ghz" if profile["isa"]["value"] == "avx512" else "avx2_clock_ghz"


def fork_join_seconds(threads_per_socket, sockets, core_ns, socket_ns):
    """One parallel loop of a forward pass's thread team (engine/kernels/parallel.hpp): thread 0
    publishes the job, then every other thread decrements one counter when done, one after
    another, each decrement bringing the counter's cache line to that thread (from a core of the
    same package: core_ns; of another: socket_ns), and thread 0 reads it back."""
    far = socket_ns if sockets > 1 else core_ns
    return ((threads_per_socket - 1) * core_ns + (sockets - 1) * threads_per_socket * socket_ns + 2 * far) * 1e-9


def decode_bytes(shape, fmt, keep=""):
    """Bytes one decode step reads: every tensor, but one row of the embedding table."""
    total = 0
    for name, rows, _, _, size in tensor_formats(shape, fmt, keep):
        total += size // rows if name == "token_embd.weight" else size
    return total


def kv_bytes(shape, positions, kv_type):
    """KV cache bytes one sequence's attention reads at `positions` cached positions, its keys
    and values stored as `kv_type` (f32, f16, bf16: the registry's row size)."""
    return 2 * shape.layers * positions * registry.row_bytes(kv_type, shape.kv_dim)


def predict_decode(shape, fmt, roofs, batch, position, kv_type, keep="", loops=0):
    """Tokens/s of a decode step of `batch` sequences, each with `position` cached positions in
    a `kv_type` cache: the longest of its memory, link and compute times, plus `loops` parallel
    loops (`cpullm info --costs --sequences`' decode_step.parallel_loops) at the roofs' fork/join
    cost. Returns (tokens/s, what bound it)."""
    weights = decode_bytes(shape, fmt, keep)
    bandwidth = roofs.bandwidth_gbs * 1e9
    memory = (weights + batch * kv_bytes(shape, position, kv_type)) / bandwidth
    link = weights * roofs.remote_fraction / (roofs.link_gbs * 1e9)
    flops = batch * (2 * matrix_params(shape) + 4 * shape.layers * shape.dim * position)
    compute = flops / (roofs.gemm_gflops[fmt] * 1e9) if batch > 1 and fmt in roofs.gemm_gflops else 0.0
    step = max(memory, link, compute)
    bound = "compute" if step == compute else "cross-socket link" if step == link else "memory bandwidth"
    sync = loops * roofs.fork_join_s
    if sync > step:
        bound = f"fork/join ({loops} parallel loops a step)"
    return batch / (step + sync), bound


def predict_prefill(shape, fmt, roofs, prompt, keep=""):
    """Seconds to run a `prompt`-token prefill (the time to first token). Returns (seconds, bound)."""
    flops = 2 * matrix_params(shape) * prompt + 2 * shape.layers * shape.dim * prompt * prompt
    compute = flops / (roofs.gemm_gflops[fmt] * 1e9)
    weights = sum(size for _, size in tensor_bytes(shape, fmt, keep))
    memory = math.ceil(prompt / CHUNK) * weights / (roofs.bandwidth_gbs * 1e9)
    return (compute, "compute") if compute >= memory else (memory, "memory bandwidth")


# Where a NUMA strategy puts the weights, on S sockets with threads spread over all of them
# (--bind numa): the share of reads that cross a socket link, the copies of the weights, how
# many nodes' memory serves the reads, and how many sockets' links carry the remote ones.
def numa_strategies(sockets):
    remote = (sockets - 1) / sockets
    return {
        "shard": {"remote": 0.0, "copies": 1, "nodes_serving": sockets, "links": sockets,
                  "why": "each node holds the rows its threads compute"},
        "replicate": {"remote": 0.0, "copies": sockets, "nodes_serving": sockets, "links": sockets,
                      "why": "a copy per node: all reads local, memory x sockets"},
        "interleave": {"remote": remote, "copies": 1, "nodes_serving": sockets, "links": sockets,
                       "why": f"pages round-robin: {remote:.0%} of each thread's reads cross a link"},
        "first-touch": {"remote": remote, "copies": 1, "nodes_serving": 1, "links": 1,
                        "why": "assumed: the page cache was filled by one reader, so every page is on one node, "
                               "whose memory serves all sockets"},
    }


def profile_roofs(profile, sockets, cores_per_socket, strategy, bandwidth_efficiency, compute_efficiency, corner="mid"):
    """Roofs of a hardware profile under a NUMA strategy, its ranged figures at `corner`:
    bandwidth from the measured figure where the profile has one, else theoretical x
    bandwidth_efficiency; compute from cores x the all-core clock of its vector width (clock_field)
    x operations per cycle x compute_efficiency; a parallel loop's cost from its core-to-core and
    socket-to-socket latencies, one thread a core (none where the profile gives no latency)."""
    def value(field, faster_when_higher=True):
        return at(profile[field]["value"], corner, faster_when_higher)
    measured = profile["memory_bandwidth_measured_gbs_per_package"]["value"]
    per_socket = value("memory_bandwidth_measured_gbs_per_package") if measured else \
        value("memory_bandwidth_gbs_per_package") * bandwidth_efficiency
    s = numa_strategies(sockets)[strategy]
    peak = cores_per_socket * sockets * value(clock_field(profile))
    fp = peak * value("fp32_flops_per_cycle_per_core") * compute_efficiency
    int8 = peak * value("int8_ops_per_cycle_per_core") * compute_efficiency
    q4_0 = peak * value("q4_0_ops_per_cycle_per_core") * compute_efficiency
    fork_join = 0.0
    if profile["core_to_core_ns"]["value"] is not None:
        far = value("socket_to_socket_ns", False) if sockets > 1 else 0.0
        fork_join = fork_join_seconds(cores_per_socket, sockets, value("core_to_core_ns", False), far)
    # float formats at the FMA rate; integer ones at the int8 rate, or Q4_0's where the GEMM's nibble
    # tile runs them; a format without GEMM panels streams its rows, taken at the int8 rate
    gemm = {name: fp if f["activations"] == "f32" else q4_0 if f["gemm_nibbles"] else int8
            for name, f in registry.formats().items()}
    link = profile["socket_link_gbs_per_package"]["value"] and value("socket_link_gbs_per_package")
    return Roofs(bandwidth_gbs=per_socket * s["nodes_serving"], gemm_gflops=gemm,
                 remote_fraction=s["remote"], link_gbs=link * s["links"] if link else math.inf, fork_join_s=fork_join,
                 source=f"profile {profile['name']}, {strategy}, {corner} corner of its ranges")


# ---------------------------------------------------------------------------------------------
# This machine: every matrix at the kernel rate measured now for its format, shape and thread
# count, plus the measured time of everything that is not a matrix product.
# ---------------------------------------------------------------------------------------------

# The (dim, ffn, kv dim) at which bench_kernels' matvec_decode runs a layer's projections, as the
# engine runs them for a step of N tokens (a decode step of N sequences, or a prompt chunk of N
# tokens): TinyLlama-1.1B, LLaMA-7B.
DECODE_LAYER_SHAPES = ((2048, 5632, 256), (4096, 11008, 4096))
# matvec_decode's set of layers is the size of the model's decode step, up to this: reads of a few
# hundred MiB can still run above memory speed on a shared host (docs/tuning.md), so beyond 1 GiB (the read
# roof's buffer) a larger set changes nothing but the time to write it.
DECODE_SET_MAX_MIB = 1024
# `cpullm profile`'s regions that are matrix products; the others are the overhead. Of those, the
# time outside every region (fork/joins, the engine's serial steps) is a step's, whatever its tokens.
MATRIX_REGIONS = {"q_proj", "k_proj", "v_proj", "o_proj", "ffn_gate", "ffn_up", "ffn_down", "lm_head"}


@dataclass
class KernelRates:
    """One thread count's kernel rates on this machine, measured now by bench_kernels."""
    threads: int
    bandwidth_gbs: float  # read bandwidth
    # (format, tokens a step) -> GB/s of weights of layers in turn, from a file mapping, over a set
    # the size of the model's decode step (matvec_decode): the caches hold of it what they hold of
    # the model's. Steps of a few tokens stream the rows, longer ones (a prompt chunk) run the
    # GEMM, each as the engine runs that many tokens, with its fork/joins and small matrices.
    layer_gbs: dict


@dataclass
class Overhead:
    """The time of what is not a matrix product, measured by `cpullm profile` of the model at
    one thread count: a calibration run, never one of the points the predictions are checked
    against."""
    decode_s: float  # per decode step: embedding, norms, RoPE, activation, sampling, serial parts
    decode_per_token_s: float  # of decode_s, what each further token of a step adds (all but the serial parts)
    decode_attention_s: float  # per decode step, at decode_position cached positions
    decode_position: float
    prefill_s: float  # the prompt's, but attention (grows with the prompt's tokens)
    prefill_attention_s: float  # the prompt's attention (grows with their square)
    prompt: int


def overhead_from_profile(profile):
    """Overhead from `cpullm profile --json`: each phase's time less its matrix regions."""
    def split(phase):
        regions = {r["name"]: r["seconds"] for r in phase["regions"]}
        attention = regions.get("attention", 0.0)
        per_token = sum(v for name, v in regions.items() if name not in MATRIX_REGIONS and name != "attention")
        return phase["seconds"] - attention - sum(regions.get(name, 0.0) for name in MATRIX_REGIONS), attention, per_token
    phases = {p["name"]: p for p in profile["phases"]}
    prefill, decode = phases["prefill"], phases["decode"]
    decode_other, decode_attention, decode_per_token = split(decode)
    prefill_other, prefill_attention, _ = split(prefill)
    steps = decode["tokens"]
    return Overhead(decode_s=decode_other / steps, decode_per_token_s=decode_per_token / steps,
                    decode_attention_s=decode_attention / steps,
                    decode_position=prefill["tokens"] + (steps - 1) / 2,
                    prefill_s=prefill_other, prefill_attention_s=prefill_attention, prompt=prefill["tokens"])


def least_overhead(runs):
    """Each part's least time over calibration runs of the same workload: other jobs only ever
    slow a part down, and a slow minute once spoiled a whole calibration (1.12 ms of other work a
    decode step against 0.19-0.23 in the tune runs around it, docs/tuning.md)."""
    times = ("decode_s", "decode_per_token_s", "decode_attention_s", "prefill_s", "prefill_attention_s")
    return Overhead(**{f: min(getattr(r, f) for r in runs) for f in times},
                    decode_position=runs[0].decode_position, prompt=runs[0].prompt)


def matrices(shape, fmt, keep=""):
    """(name, rows, cols, format, bytes) of the matrices every token multiplies: as matrix_params,
    the embedding table only when it is also the output layer."""
    has_output = any(name == "output.weight" for name, *_ in shape.tensors)
    return [t for t in tensor_formats(shape, fmt, keep)
            if t[1] > 1 and (t[0] != "token_embd.weight" or not has_output)]


def output_layer(shape):
    has_output = any(name == "output.weight" for name, *_ in shape.tensors)
    return "output.weight" if has_output else "token_embd.weight"


def nearest_decode_shape(shape):
    """The benchmarked decode layer closest in size (log of its weights) to the model's first:
    q and o (dim x dim), k and v (kv dim x dim), gate, up and down (ffn x dim)."""
    model = sum(rows * cols for name, rows, cols, *_ in shape.tensors
                if name.startswith("blk.0.") and name.endswith(".weight") and rows > 1)
    def layer(dim, ffn, kv_dim):
        return 2 * dim * dim + 2 * kv_dim * dim + 3 * ffn * dim
    return min(DECODE_LAYER_SHAPES, key=lambda s: abs(math.log(layer(*s) / model)))


def decode_set_mib(shape, fmt):
    """MiB of matvec_decode's set for this format: the model's decode step in it, at most
    DECODE_SET_MAX_MIB."""
    return min(math.ceil(decode_bytes(shape, fmt) / (1 << 20)), DECODE_SET_MAX_MIB)


def weight_rate(rates, fmt, tokens=1):
    """Bytes/s a step of `tokens` tokens goes through a matrix of this format at: matvec_decode's
    rate, uncapped (its set, like the model's step, can be partly cache-resident and read faster
    than memory)."""
    return rates.layer_gbs[(fmt, tokens)] * 1e9


def prefill_chunks(prompt, sequences, chunk=CHUNK):
    """The token counts of the forward passes that prefill `sequences` prompts of `prompt` tokens
    (bench -np): their tokens end to end, `chunk` at a time."""
    tokens = prompt * sequences
    return [chunk] * (tokens // chunk) + ([tokens % chunk] if tokens % chunk else [])


def predict_decode_host(shape, fmt, rates, overhead, position, keep="", sequences=1):
    """(tokens/s of all sequences, seconds per part of a step) of a decode step of `sequences`
    sequences (one token each) at `position` cached positions: every matrix's bytes at its
    format's weight rate at that many tokens, plus the measured overhead: attention per sequence,
    scaled by the positions attended, the rest per token but for the step's serial part."""
    parts = {"matrices": sum(size / weight_rate(rates, f, sequences) for _, _, _, f, size in matrices(shape, fmt, keep)),
             "attention": sequences * overhead.decode_attention_s * (position + 1) / (overhead.decode_position + 1),
             "other": overhead.decode_s + (sequences - 1) * overhead.decode_per_token_s}
    return sequences / sum(parts.values()), parts


def predict_prefill_host(shape, fmt, rates, overhead, prompt, keep="", chunk=CHUNK, sequences=1, depth=0):
    """(seconds, seconds per part) of the prefill of `sequences` prompts of `prompt` tokens, one
    after another in chunks of `chunk` tokens (bench -np): each chunk goes through every matrix at
    the rate of a step of its length (matvec_decode at that many tokens: the GEMM, as the engine
    runs it layer by layer); the output layer runs once per chunk in which prompts end, for their
    last tokens' logits, at the rate of the nearest measured token count; the overhead scales
    from the calibration's prompt (attention with the square of each prompt's tokens, the rest
    linearly). After `depth` cached positions (bench -d) each prompt token also meets those: the
    attention scales with prompt^2 / 2 + prompt * depth query-key pairs."""
    chunks = prefill_chunks(prompt, sequences, chunk)
    ends = [sum(1 for s in range(1, sequences + 1) if c * chunk < s * prompt <= (c + 1) * chunk)
            for c in range(len(chunks))]
    out = output_layer(shape)
    layers = lm_head = 0.0
    for name, _, _, f, size in matrices(shape, fmt, keep):
        if name == out:
            measured = [n for fm, n in rates.layer_gbs if fm == f]
            lm_head = sum(size / weight_rate(rates, f, min(measured, key=lambda n: abs(n - k))) for k in ends if k)
        else:
            layers += sum(size / weight_rate(rates, f, n) for n in chunks)
    scale = prompt / overhead.prompt
    pairs = (prompt * prompt / 2 + prompt * depth) / (overhead.prompt * overhead.prompt / 2)
    parts = {"matrices": layers, "output layer": lm_head,
             "attention": sequences * overhead.prefill_attention_s * pairs,
             "other": sequences * overhead.prefill_s * scale}
    return sum(parts.values()), parts
