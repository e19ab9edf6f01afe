#include "engine/model/config.hpp"

#include <charconv>
#include <cmath>

#include "engine/format/gguf.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// Bounds far above any real model, low enough that products of them cannot overflow.
constexpr uint64_t kMaxWidth = 1u << 20;
constexpr uint64_t kMaxLayers = 4096;

int64_t bounded(const GgufFile& file, std::string_view key, uint64_t value, uint64_t max) {
  if (value < 1 || value > max) fail_file(file.path(), "metadata '{}' is {} (must be 1 to {})", key, value, max);
  return static_cast<int64_t>(value);
}

}  // namespace

LlamaConfig LlamaConfig::from_gguf(const GgufFile& file) {
  std::string_view arch = file.require_string("general.architecture");
  if (arch != "llama")
    fail_file(file.path(), "architecture '{}' is not supported (cpullm runs 'llama')", arch);
  LlamaConfig c;
  c.dim = bounded(file, "llama.embedding_length", file.require_uint("llama.embedding_length"), kMaxWidth);
  c.ffn_dim = bounded(file, "llama.feed_forward_length", file.require_uint("llama.feed_forward_length"), kMaxWidth);
  c.n_layers = bounded(file, "llama.block_count", file.require_uint("llama.block_count"), kMaxLayers);
  c.n_heads = bounded(file, "llama.attention.head_count", file.require_uint("llama.attention.head_count"), kMaxWidth);
  c.n_kv_heads = bounded(file, "llama.attention.head_count_kv",
                         file.uint_or("llama.attention.head_count_kv", static_cast<uint64_t>(c.n_heads)), kMaxWidth);
  c.train_context = bounded(file, "llama.context_length", file.require_uint("llama.context_length"), 1u << 24);
  c.rms_eps = static_cast<float>(file.require_float("llama.attention.layer_norm_rms_epsilon"));
  c.rope_theta = static_cast<float>(file.float_or("llama.rope.freq_base", 10000.0));

  if (c.dim % c.n_heads != 0)
    fail_file(file.path(), "embedding_length {} is not a multiple of head_count {}", c.dim, c.n_heads);
  c.head_dim = c.dim / c.n_heads;
  if (c.head_dim % 2 != 0) fail_file(file.path(), "head size {} is odd; RoPE rotates pairs", c.head_dim);
  if (c.n_heads % c.n_kv_heads != 0)
    fail_file(file.path(), "head_count {} is not a multiple of head_count_kv {}", c.n_heads, c.n_kv_heads);
  uint64_t rope_dims = file.uint_or("llama.rope.dimension_count", static_cast<uint64_t>(c.head_dim));
  if (rope_dims != static_cast<uint64_t>(c.head_dim))
    fail_file(file.path(), "llama.rope.dimension_count {} differs from the head size {} (partial RoPE is not supported)",
              rope_dims, c.head_dim);
  if (!(c.rms_eps > 0.0f && c.rms_eps < 1.0f))
    fail_file(file.path(), "llama.attention.layer_norm_rms_epsilon is {} (must be in (0, 1))", c.rms_eps);
  if (!(c.rope_theta > 1.0f) || !std::isfinite(c.rope_theta))
    fail_file(file.path(), "llama.rope.freq_base is {} (must be finite and > 1)", c.rope_theta);
  // As llama.cpp: every block's tensors must belong to a block the header counts.
  for (const GgufTensorInfo& t : file.tensors()) {
    uint64_t block = 0;
    if (!t.name.starts_with("blk.")) continue;
    const char* digits = t.name.data() + 4;
    const auto [end, error] = std::from_chars(digits, t.name.data() + t.name.size(), block);
    if (error == std::errc() && end != digits && block >= static_cast<uint64_t>(c.n_layers))
      fail_file(file.path(), "tensor '{}' is in block {}, but llama.block_count is {}", t.name, block, c.n_layers);
  }
  return c;
}

}  // namespace cpullm
