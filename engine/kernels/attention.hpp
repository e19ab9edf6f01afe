// Causal self-attention of one query position over the KV cache, with grouped-query heads.
#pragma once
#include <cstdint>

namespace cpullm {

struct AttentionShape {
  int64_t n_heads;     // query heads
  int64_t n_kv_heads;  // key/value heads; query head h reads kv head h / (n_heads / n_kv_heads)
  int64_t head_dim;
};

// out (n_heads, head_dim) = softmax(q . K^T / sqrt(head_dim)) . V over positions [0, n_positions).
// keys, values: (n_positions, n_kv_heads * head_dim), one row per cached position.
// scores: scratch of (n_heads, n_positions).
void attention(float* out, const float* q, const float* keys, const float* values, int64_t n_positions,
               const AttentionShape& shape, float* scores);

}  // namespace cpullm
