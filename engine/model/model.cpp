#include "engine/model/model.hpp"

#include <unistd.h>

#include <algorithm>

#include "engine/kernels/attention.hpp"
#include "engine/kernels/matvec.hpp"
#include "engine/kernels/ops.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

constexpr int64_t kDefaultContextCap = 4096;

uint64_t physical_memory_bytes() {
  return static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
}

}  // namespace

Model::Model(const std::string& path, int64_t context)
    : file_(std::make_unique<GgufFile>(path)), config_(LlamaConfig::from_gguf(*file_)),
      weights_(map_weights(*file_, config_)) {
  const LlamaConfig& c = config_;
  if (context < 0) fail("context {} is negative", context);
  cache_.context = context ? context : std::min(c.train_context, kDefaultContextCap);
  // Refuse a cache that cannot fit before trying to allocate it.
  const uint64_t cache_bytes = 2ull * c.n_layers * cache_.context * c.kv_dim() * sizeof(float);
  if (cache_.context > (1 << 24) || cache_bytes > physical_memory_bytes())
    fail("{}: a KV cache for {} positions needs {:.1f} GiB, more than this machine's memory", path, cache_.context,
         cache_bytes / 1073741824.0);
  cache_.keys.assign(static_cast<std::size_t>(c.n_layers * cache_.context * c.kv_dim()), 0.0f);
  cache_.values.assign(cache_.keys.size(), 0.0f);

  state_.x.resize(c.dim);
  state_.xb.resize(c.dim);
  state_.xb2.resize(c.dim);
  state_.q.resize(c.dim);
  state_.hb.resize(c.ffn_dim);
  state_.hb2.resize(c.ffn_dim);
  state_.scores.resize(c.n_heads * cache_.context);
  state_.logits.resize(c.vocab_size);
}

std::span<const float> Model::forward(int32_t token, int64_t pos) {
  const LlamaConfig& c = config_;
  if (token < 0 || token >= c.vocab_size) fail("token id {} is outside the vocabulary (0..{})", token, c.vocab_size - 1);
  if (pos < 0 || pos >= cache_.context) fail("position {} is outside the context of {} positions", pos, cache_.context);
  RunState& s = state_;
  const AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim};

  weight_row_to_float(s.x.data(), weights_.token_embedding, token);

  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    float* layer_keys = cache_.keys.data() + l * cache_.context * c.kv_dim();
    float* layer_values = cache_.values.data() + l * cache_.context * c.kv_dim();
    float* k = layer_keys + pos * c.kv_dim();
    float* v = layer_values + pos * c.kv_dim();

    // Attention: q, k, v from the normalised residual; k and v go straight into the cache.
    rmsnorm(s.xb.data(), s.x.data(), w.attn_norm, c.dim, c.rms_eps);
    matvec(s.q.data(), w.wq, s.xb.data());
    matvec(k, w.wk, s.xb.data());
    matvec(v, w.wv, s.xb.data());
    rope(s.q.data(), c.n_heads, c.head_dim, pos, c.rope_theta);
    rope(k, c.n_kv_heads, c.head_dim, pos, c.rope_theta);
    attention(s.xb.data(), s.q.data(), layer_keys, layer_values, pos + 1, shape, s.scores.data());
    matvec(s.xb2.data(), w.wo, s.xb.data());
    add_in_place(s.x.data(), s.xb2.data(), c.dim);

    // Feed-forward: down(silu(gate(x)) * up(x)).
    rmsnorm(s.xb.data(), s.x.data(), w.ffn_norm, c.dim, c.rms_eps);
    matvec(s.hb.data(), w.w_gate, s.xb.data());
    matvec(s.hb2.data(), w.w_up, s.xb.data());
    swiglu(s.hb.data(), s.hb2.data(), c.ffn_dim);
    matvec(s.xb.data(), w.w_down, s.hb.data());
    add_in_place(s.x.data(), s.xb.data(), c.dim);
  }

  rmsnorm(s.x.data(), s.x.data(), weights_.output_norm, c.dim, c.rms_eps);
  matvec(s.logits.data(), weights_.output, s.x.data());
  return s.logits;
}

}  // namespace cpullm
