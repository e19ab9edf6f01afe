"""Independent numpy (float64) reference of llama.cpp's `llama` and `qwen2` forward passes.

Reads a GGUF file with llama.cpp tensor names and computes the logits of a whole token
sequence at once with a causal mask. Written from the models' math, not from the C++ engine:
- llama (Llama 1-3, Mistral): RoPE on adjacent pairs; Llama 3's frequencies scaled as Meta's
  apply_scaling does (from rope_freqs.weight, llama.cpp's per-pair divisors, or from the
  llama3 rope.scaling keys) or linearly (rope.scaling.type linear); an optional sliding window
  (attention.sliding_window: a query sees itself and the window - 1 positions before it).
- qwen2: the same block with biases added to q, k and v, and NEOX RoPE (pairs (x[i], x[i+hd/2])).
Matrices in an integer format (ggml's block types, per-channel INT8) meet their input as
cpullm's integer dot products do: quantized to Q8_0 blocks first (quantize_q8_0 below).
The KV cache can hold its keys (after RoPE) and values in F16, BF16 or Q8_0 (`kv_type`): they are
rounded as stored (cached_as below), and attention reads the rounded values.
"""
import numpy as np

from gguf_reader import BLOCKS, CPULLM_INT8_CHANNEL, GGUFFile

INTEGER_TYPES = tuple(BLOCKS) + (CPULLM_INT8_CHANNEL,)


def quantize_q8_0(x):
    """x [T, n] as llama.cpp's quantize_row_q8_0 leaves it, dequantized: per block of 32 values in
    float32, d = amax / 127, q = roundf(x * (1 / d)) (halves away from zero), d stored as FP16."""
    blocks = x.astype(np.float32).reshape(x.shape[0], -1, 32)                   # [T, n/32, 32]
    d = np.abs(blocks).max(axis=-1, keepdims=True) / np.float32(127)            # float32
    inverse = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    v = (blocks * inverse).astype(np.float64)
    q = np.sign(v) * np.floor(np.abs(v) + 0.5)
    return (d.astype(np.float16).astype(np.float64) * q).reshape(x.shape)


def round_to_bf16(x):
    """float32 values rounded to BF16's 8 bits of mantissa, to nearest, ties to even."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return rounded.view(np.float32).astype(np.float64)


def cached_as(x, kv_type):
    """x [T, n] (rows of the cache) as a KV cache of kv_type holds them, widened back to float64."""
    if kv_type == "f32":
        return x
    if kv_type == "f16":
        return x.astype(np.float32).astype(np.float16).astype(np.float64)
    if kv_type == "bf16":
        return round_to_bf16(x)
    if kv_type == "q8_0":
        return quantize_q8_0(x)
    raise ValueError(f"KV cache type {kv_type!r}")


class Linear:
    """A weight matrix [out, in] in float64 and whether its input is quantized to Q8_0 first."""

    def __init__(self, g, name):
        self.w = g.tensor(name)
        self.quantized_input = g.tensor_type(name) in INTEGER_TYPES

    def __call__(self, x):
        """x [T, in] -> [T, out]."""
        return (quantize_q8_0(x) if self.quantized_input else x) @ self.w.T


class LlamaModel:
    """Hyper-parameters and float64 weights of a GGUF `llama` or `qwen2` model."""

    def __init__(self, gguf_path):
        g = GGUFFile(gguf_path)
        md = g.metadata
        arch = md.get("general.architecture", "llama")
        if arch not in ("llama", "qwen2"):
            raise ValueError(f"{gguf_path}: architecture {arch!r}, expected 'llama' or 'qwen2'")

        def key(name, default=None):
            return md.get(f"{arch}.{name}", default)

        self.metadata = md
        self.dim = int(key("embedding_length"))
        self.n_layers = int(key("block_count"))
        self.ffn = int(key("feed_forward_length"))
        self.n_heads = int(key("attention.head_count"))
        self.n_kv_heads = int(key("attention.head_count_kv", self.n_heads))
        self.eps = float(key("attention.layer_norm_rms_epsilon"))
        self.head_dim = self.dim // self.n_heads
        n_rot = int(key("rope.dimension_count", self.head_dim))
        if n_rot != self.head_dim:
            raise NotImplementedError(f"rope.dimension_count {n_rot} != head_dim {self.head_dim}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError("head_count must be a multiple of head_count_kv")
        self.neox = arch == "qwen2"                                  # NEOX RoPE: rotate halves
        self.window = int(key("attention.sliding_window", 0))       # 0: no window
        self.kv_type = "f32"                                         # what the KV cache holds
        self.freqs = rope_frequencies(g, key, self.head_dim)        # [hd/2] radians per position

        t = g.tensor

        def bias(name):  # [out] or 0 where the file has none
            return t(name) if g.has(name) else 0.0

        self.tok_embd = t("token_embd.weight")                      # [vocab, dim]
        self.vocab = self.tok_embd.shape[0]
        self.layers = []
        for i in range(self.n_layers):
            p = f"blk.{i}."
            layer = {k: t(p + k + ".weight") for k in ("attn_norm", "ffn_norm")}  # [dim] each
            layer.update({k: Linear(g, p + k + ".weight") for k in (
                "attn_q",       # [n_heads*head_dim, dim]
                "attn_k",       # [n_kv_heads*head_dim, dim]
                "attn_v",       # [n_kv_heads*head_dim, dim]
                "attn_output",  # [dim, n_heads*head_dim]
                "ffn_gate",     # [ffn, dim]
                "ffn_up",       # [ffn, dim]
                "ffn_down",     # [dim, ffn]
            )})
            layer.update({k + "_bias": bias(p + k + ".bias") for k in ("attn_q", "attn_k", "attn_v")})
            self.layers.append(layer)
        self.output_norm = t("output_norm.weight")                  # [dim]
        # output projection [vocab, dim]; tied to the embedding when absent
        self.output = Linear(g, "output.weight" if g.has("output.weight") else "token_embd.weight")


def rope_frequencies(g, key, hd):
    """Each pair's angle per position [hd/2]: theta^(-2i/hd), then the file's scaling.

    Llama 3 (Meta's apply_scaling): a frequency whose wavelength 2*pi/f is shorter than
    original_context / high_freq_factor stays; one longer than original_context / low_freq_factor
    is divided by the factor; in between, smooth = (original_context / wavelength - low) /
    (high - low) and f' = (1 - smooth) * f / factor + smooth * f. llama.cpp's files carry these as
    rope_freqs.weight, the per-pair divisors f / f'. Linear scaling divides every frequency by
    the factor; a missing scaling type means linear, as in llama.cpp.
    """
    theta = float(key("rope.freq_base", 10000.0))
    freqs = theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    kind = key("rope.scaling.type", "linear")
    if kind not in ("none", "linear", "llama3"):
        raise NotImplementedError(f"rope.scaling.type {kind!r}")
    if g.has("rope_freqs.weight"):
        freqs = freqs / g.tensor("rope_freqs.weight")
    elif kind == "llama3":
        factor, low, high = (float(key("rope.scaling." + k)) for k in ("factor", "low_freq_factor", "high_freq_factor"))
        original = float(key("rope.scaling.original_context_length"))
        wavelength = 2 * np.pi / freqs
        smooth = (original / wavelength - low) / (high - low)
        freqs = np.where(wavelength < original / high, freqs,
                         np.where(wavelength > original / low, freqs / factor,
                                  (1 - smooth) * freqs / factor + smooth * freqs))
    if kind == "linear":
        freqs = freqs / float(key("rope.scaling.factor", 1.0))
    return freqs


def rms_norm(x, w, eps):
    """x: [T, dim], w: [dim] -> x / sqrt(mean(x^2) + eps) * w."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, freqs, neox):
    """RoPE on x: [T, n_heads, head_dim] at positions 0..T-1; pair i turns by pos * freqs[i].

    llama.cpp's NORMAL mode pairs (x[2i], x[2i+1]); its NEOX mode (x[i], x[i + head_dim/2]).
    """
    T, _, hd = x.shape
    ang = np.arange(T, dtype=np.float64)[:, None] * freqs[None, :]    # [T, hd/2]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]       # [T, 1, hd/2]
    first = np.arange(hd // 2) if neox else np.arange(0, hd, 2)      # [hd/2] each pair's first value
    second = first + (hd // 2 if neox else 1)
    x0, x1 = x[..., first], x[..., second]                            # [T, H, hd/2]
    out = np.empty_like(x)
    out[..., first] = x0 * cos - x1 * sin
    out[..., second] = x0 * sin + x1 * cos
    return out


def silu(x):
    """x * sigmoid(x)."""
    return x / (1.0 + np.exp(-x))


QUERY_CHUNK = 512  # queries whose scores exist at once: [H, 512, T], not [H, T, T], at thousands of positions


def attend(m, q, k, v):
    """Causal attention [T, H*hd] of q [T, H, hd] over keys and values [T, H, hd], within the window."""
    T, H, hd = q.shape
    out = np.empty((T, H, hd))
    key_pos = np.arange(T)[None, :]
    for first in range(0, T, QUERY_CHUNK):
        query_pos = np.arange(first, min(T, first + QUERY_CHUNK))[:, None]
        visible = key_pos <= query_pos                                # [chunk, T] causal
        if m.window:
            visible &= key_pos > query_pos - m.window                 # within the sliding window
        s = np.einsum("thd,shd->hts", q[query_pos[:, 0]], k) / np.sqrt(hd) + np.where(visible, 0.0, -np.inf)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        p = s / s.sum(axis=-1, keepdims=True)                         # softmax over keys
        out[query_pos[:, 0]] = np.einsum("hts,shd->thd", p, v)
    return out.reshape(T, H * hd)


def forward(m, token_ids):
    """Logits [T, vocab] (float64) at every position of token_ids for LlamaModel m."""
    ids = np.asarray(token_ids, dtype=np.int64)
    T, H, KV, hd = len(ids), m.n_heads, m.n_kv_heads, m.head_dim
    group = H // KV
    x = m.tok_embd[ids]                                               # [T, dim]
    for L in m.layers:
        h = rms_norm(x, L["attn_norm"], m.eps)                        # [T, dim]
        q = (L["attn_q"](h) + L["attn_q_bias"]).reshape(T, H, hd)     # [T, H, hd]
        k = (L["attn_k"](h) + L["attn_k_bias"]).reshape(T, KV, hd)    # [T, KV, hd]
        v = (L["attn_v"](h) + L["attn_v_bias"]).reshape(T, KV, hd)    # [T, KV, hd]
        q, k = rope(q, m.freqs, m.neox), rope(k, m.freqs, m.neox)
        k = cached_as(k.reshape(T, KV * hd), m.kv_type).reshape(T, KV, hd)
        v = cached_as(v.reshape(T, KV * hd), m.kv_type).reshape(T, KV, hd)
        k = np.repeat(k, group, axis=1)                               # [T, H, hd]: head h -> kv h//group
        v = np.repeat(v, group, axis=1)
        o = attend(m, q, k, v)                                        # [T, H*hd]
        x = x + L["attn_output"](o)                                   # [T, dim]
        h = rms_norm(x, L["ffn_norm"], m.eps)
        f = silu(L["ffn_gate"](h)) * L["ffn_up"](h)                   # [T, ffn]
        x = x + L["ffn_down"](f)                                      # [T, dim]
    x = rms_norm(x, m.output_norm, m.eps)
    return m.output(x)                                                # [T, vocab]

