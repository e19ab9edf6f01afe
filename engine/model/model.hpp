// A LLaMA model ready to run: the mapped file, its weights, a KV cache and scratch buffers.
// forward() is the whole network for one token, written as the list of steps it is.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/format/gguf.hpp"
#include "engine/kernels/attention.hpp"
#include "engine/model/config.hpp"
#include "engine/model/weights.hpp"

namespace cpullm {

struct KvCache {
  int64_t context = 0;        // positions it holds
  std::vector<float> keys;    // (n_layers, context, kv_dim), RoPE already applied
  std::vector<float> values;  // (n_layers, context, kv_dim)
};

struct RunState {
  std::vector<float> x;       // (dim) residual stream
  std::vector<float> xb;      // (dim) normalised input, then attention output
  std::vector<float> xb2;     // (dim) output of a projection back to dim
  std::vector<float> q;       // (dim) query of the current position
  std::vector<float> hb;      // (ffn_dim) gate, then the SwiGLU activation
  std::vector<float> hb2;     // (ffn_dim) up projection
  std::vector<float> scores;  // (n_heads, context) attention scores
  std::vector<float> logits;  // (vocab)
};

// Scratch for forward_batch: one chunk of up to `chunk` tokens goes through the layers
// together, so every projection is one matmul. Allocated at the first forward_batch.
struct BatchState {
  int64_t chunk = 0;             // tokens per chunk: min(kMaxPrefillChunk, context)
  std::vector<float> x;          // (chunk, dim) residual streams
  std::vector<float> xb;         // (chunk, dim) normalised inputs, then attention outputs
  std::vector<float> xb2;        // (chunk, dim) projections back to dim
  std::vector<float> q;          // (chunk, dim) queries
  std::vector<float> hb;         // (chunk, ffn_dim) gates, then the SwiGLU activations
  std::vector<float> hb2;        // (chunk, ffn_dim) up projections
  std::vector<float> logits;     // (tokens, vocab) every token's logits, when asked for
};

class Model {
 public:
  // context 0 means min(trained context, 4096).
  Model(const std::string& path, int64_t context = 0);

  const GgufFile& file() const { return *file_; }
  const LlamaConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  int64_t context() const { return cache_.context; }
  uint64_t kv_cache_bytes() const { return 2 * cache_.keys.size() * sizeof(float); }

  // Runs `token` at position `pos` (0 <= pos < context, earlier positions already run) and
  // returns the logits (vocab) for the next token. Valid until the next call.
  std::span<const float> forward(int32_t token, int64_t pos);

  // Prefill: runs `tokens` at positions pos, pos + 1, ... (pos + tokens.size() <= context,
  // earlier positions already run) with a matrix-matrix product per projection, in chunks of
  // at most kMaxPrefillChunk tokens. Returns the last token's logits (vocab), or with
  // all_logits every token's, (tokens, vocab). Valid until the next call. The logits equal
  // forward()'s token by token up to FP32 rounding.
  std::span<const float> forward_batch(std::span<const int32_t> tokens, int64_t pos, bool all_logits = false);

  // Tile sizes of forward_batch's attention (decode's single query needs none).
  void set_attention_tiles(const AttentionTiles& tiles) { attention_tiles_ = tiles; }
  static constexpr int64_t kMaxPrefillChunk = 512;

 private:
  void check_positions(std::span<const int32_t> tokens, int64_t pos) const;
  // One chunk through every layer; leaves the residual streams in batch_.x.
  void run_chunk(std::span<const int32_t> tokens, int64_t pos);

  std::unique_ptr<GgufFile> file_;
  LlamaConfig config_;
  ModelWeights weights_;
  KvCache cache_;
  RunState state_;
  BatchState batch_;
  AttentionTiles attention_tiles_;  // query x key tile of the prefill attention
};

}  // namespace cpullm
