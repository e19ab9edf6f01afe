#include "engine/model/model.hpp"

#include <unistd.h>

#include <algorithm>

#include "engine/kernels/attention.hpp"
#include "engine/kernels/matmul.hpp"
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

void Model::check_positions(std::span<const int32_t> tokens, int64_t pos) const {
  const int64_t vocab = config_.vocab_size;
  for (int32_t token : tokens)
    if (token < 0 || token >= vocab) fail("token id {} is outside the vocabulary (0..{})", token, vocab - 1);
  const int64_t last = pos + static_cast<int64_t>(tokens.size()) - 1;
  if (pos < 0 || last >= cache_.context)
    fail("position {} is outside the context of {} positions", pos < 0 ? pos : last, cache_.context);
}

std::span<const float> Model::forward(int32_t token, int64_t pos) {
  const LlamaConfig& c = config_;
  check_positions({&token, 1}, pos);
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

std::span<const float> Model::forward_batch(std::span<const int32_t> tokens, int64_t pos, bool all_logits) {
  const LlamaConfig& c = config_;
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) fail("forward_batch: no tokens");
  check_positions(tokens, pos);
  BatchState& b = batch_;
  if (b.chunk == 0) {
    b.chunk = std::min(kMaxPrefillChunk, cache_.context);
    for (auto* buffer : {&b.x, &b.xb, &b.xb2, &b.q}) buffer->resize(b.chunk * c.dim);
    for (auto* buffer : {&b.hb, &b.hb2}) buffer->resize(b.chunk * c.ffn_dim);
  }
  if (all_logits) b.logits.resize(n * c.vocab_size);

  int64_t count = 0;  // tokens in the chunk just run
  for (int64_t start = 0; start < n; start += count) {
    count = std::min(b.chunk, n - start);
    run_chunk(tokens.subspan(start, count), pos + start);
    if (all_logits) {
      for (int64_t t = 0; t < count; ++t)
        rmsnorm(&b.x[t * c.dim], &b.x[t * c.dim], weights_.output_norm, c.dim, c.rms_eps);
      matmul(&b.logits[start * c.vocab_size], c.vocab_size, weights_.output, b.x.data(), c.dim, count);
    }
  }
  if (all_logits) return {b.logits.data(), static_cast<std::size_t>(n * c.vocab_size)};
  // Only the last token's logits are wanted: one matvec.
  rmsnorm(state_.x.data(), &b.x[(count - 1) * c.dim], weights_.output_norm, c.dim, c.rms_eps);
  matvec(state_.logits.data(), weights_.output, state_.x.data());
  return state_.logits;
}

void Model::run_chunk(std::span<const int32_t> tokens, int64_t pos) {
  const LlamaConfig& c = config_;
  const int64_t n = static_cast<int64_t>(tokens.size()), dim = c.dim, kv_dim = c.kv_dim();
  BatchState& b = batch_;
  const AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim};
  // Every token's input normalised into b.xb.
  auto normalise = [&](const float* weight) {
    for (int64_t t = 0; t < n; ++t) rmsnorm(&b.xb[t * dim], &b.x[t * dim], weight, dim, c.rms_eps);
  };

  for (int64_t t = 0; t < n; ++t) weight_row_to_float(&b.x[t * dim], weights_.token_embedding, tokens[t]);

  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    float* layer_keys = cache_.keys.data() + l * cache_.context * kv_dim;
    float* layer_values = cache_.values.data() + l * cache_.context * kv_dim;
    float* k = layer_keys + pos * kv_dim;  // (n, kv_dim): the chunk's rows of the cache
    float* v = layer_values + pos * kv_dim;

    // Attention: q, k, v for every token; k and v go straight into the cache rows. Token t
    // then attends to positions 0 .. pos + t, the chunk's earlier tokens included, tile by tile.
    normalise(w.attn_norm);
    matmul(b.q.data(), dim, w.wq, b.xb.data(), dim, n);
    matmul(k, kv_dim, w.wk, b.xb.data(), dim, n);
    matmul(v, kv_dim, w.wv, b.xb.data(), dim, n);
    for (int64_t t = 0; t < n; ++t) {
      rope(&b.q[t * dim], c.n_heads, c.head_dim, pos + t, c.rope_theta);
      rope(k + t * kv_dim, c.n_kv_heads, c.head_dim, pos + t, c.rope_theta);
    }
    attention_tiled(b.xb.data(), b.q.data(), pos, n, layer_keys, layer_values, shape, attention_tiles_);
    matmul(b.xb2.data(), dim, w.wo, b.xb.data(), dim, n);
    add_in_place(b.x.data(), b.xb2.data(), n * dim);

    // Feed-forward: down(silu(gate(x)) * up(x)).
    normalise(w.ffn_norm);
    matmul(b.hb.data(), c.ffn_dim, w.w_gate, b.xb.data(), dim, n);
    matmul(b.hb2.data(), c.ffn_dim, w.w_up, b.xb.data(), dim, n);
    swiglu(b.hb.data(), b.hb2.data(), n * c.ffn_dim);
    matmul(b.xb.data(), dim, w.w_down, b.hb.data(), c.ffn_dim, n);
    add_in_place(b.x.data(), b.xb.data(), n * dim);
  }
}

}  // namespace cpullm
