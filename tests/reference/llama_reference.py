"""Independent numpy (float64) reference of llama.cpp's `llama` architecture forward pass.

Reads a GGUF file with llama.cpp tensor names and computes the logits of a whole token
sequence at once with a causal mask. Written from the model's math, not from the C++ engine.
Matrices in an integer format (ggml's block types, per-channel INT8) meet their input as
cpullm's integer dot products do: quantized to Q8_0 blocks first (quantize_q8_0 below).
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


class Linear:
    """A weight matrix [out, in] in float64 and whether its input is quantized to Q8_0 first."""

    def __init__(self, g, name):
        self.w = g.tensor(name)
        self.quantized_input = g.tensor_type(name) in INTEGER_TYPES

    def __call__(self, x):
        """x [T, in] -> [T, out]."""
        return (quantize_q8_0(x) if self.quantized_input else x) @ self.w.T


class LlamaModel:
    """Hyper-parameters and float64 weights of a GGUF `llama` model."""

    def __init__(self, gguf_path):
        g = GGUFFile(gguf_path)
        md = g.metadata
        arch = md.get("general.architecture", "llama")
        if arch != "llama":
            raise ValueError(f"{gguf_path}: architecture {arch!r}, expected 'llama'")
        self.metadata = md
        self.dim = int(md["llama.embedding_length"])
        self.n_layers = int(md["llama.block_count"])
        self.ffn = int(md["llama.feed_forward_length"])
        self.n_heads = int(md["llama.attention.head_count"])
        self.n_kv_heads = int(md.get("llama.attention.head_count_kv", self.n_heads))
        self.eps = float(md["llama.attention.layer_norm_rms_epsilon"])
        self.theta = float(md.get("llama.rope.freq_base", 10000.0))
        self.head_dim = self.dim // self.n_heads
        n_rot = int(md.get("llama.rope.dimension_count", self.head_dim))
        if n_rot != self.head_dim:
            raise NotImplementedError(f"rope.dimension_count {n_rot} != head_dim {self.head_dim}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError("head_count must be a multiple of head_count_kv")

        t = g.tensor
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
            self.layers.append(layer)
        self.output_norm = t("output_norm.weight")                  # [dim]
        # output projection [vocab, dim]; tied to the embedding when absent
        self.output = Linear(g, "output.weight" if g.has("output.weight") else "token_embd.weight")


def rms_norm(x, w, eps):
    """x: [T, dim], w: [dim] -> x / sqrt(mean(x^2) + eps) * w."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_normal(x, theta):
    """llama.cpp NORMAL-mode RoPE on x: [T, n_heads, head_dim].

    Rotates adjacent pairs (x[2i], x[2i+1]) of each head by angle pos * theta^(-2i/head_dim),
    pos = 0..T-1.
    """
    T, _, hd = x.shape
    freqs = theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)   # [hd/2]
    ang = np.arange(T, dtype=np.float64)[:, None] * freqs[None, :]    # [T, hd/2]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]       # [T, 1, hd/2]
    x0, x1 = x[..., 0::2], x[..., 1::2]                               # [T, H, hd/2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out


def silu(x):
    """x * sigmoid(x)."""
    return x / (1.0 + np.exp(-x))


def forward(m, token_ids):
    """Logits [T, vocab] (float64) at every position of token_ids for LlamaModel m."""
    ids = np.asarray(token_ids, dtype=np.int64)
    T, H, KV, hd = len(ids), m.n_heads, m.n_kv_heads, m.head_dim
    group = H // KV
    mask = np.triu(np.full((T, T), -np.inf), k=1)                     # [T, T] causal
    x = m.tok_embd[ids]                                               # [T, dim]
    for L in m.layers:
        h = rms_norm(x, L["attn_norm"], m.eps)                        # [T, dim]
        q = L["attn_q"](h).reshape(T, H, hd)                          # [T, H, hd]
        k = L["attn_k"](h).reshape(T, KV, hd)                         # [T, KV, hd]
        v = L["attn_v"](h).reshape(T, KV, hd)                         # [T, KV, hd]
        q, k = rope_normal(q, m.theta), rope_normal(k, m.theta)
        k = np.repeat(k, group, axis=1)                               # [T, H, hd]: head h -> kv h//group
        v = np.repeat(v, group, axis=1)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask      # [H, T, T]
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        p = s / s.sum(axis=-1, keepdims=True)                         # softmax over keys
        o = np.einsum("hts,shd->thd", p, v).reshape(T, H * hd)        # [T, H*hd]
        x = x + L["attn_output"](o)                                   # [T, dim]
        h = rms_norm(x, L["ffn_norm"], m.eps)
        f = silu(L["ffn_gate"](h)) * L["ffn_up"](h)                   # [T, ffn]
        x = x + L["ffn_down"](f)                                      # [T, dim]
    x = rms_norm(x, m.output_norm, m.eps)
    return m.output(x)                                                # [T, vocab]


def logits_for_tokens(gguf_path, token_ids):
    """Load gguf_path and return float64 logits [len(token_ids), vocab] at every position."""
    return forward(LlamaModel(gguf_path), token_ids)
