#include "engine/kernels/attention.hpp"

#include <cmath>

#include "engine/kernels/ops.hpp"

namespace cpullm {

void attention(float* out, const float* q, const float* keys, const float* values, int64_t n_positions,
               const AttentionShape& shape, float* scores) {
  const int64_t kv_dim = shape.n_kv_heads * shape.head_dim;
  const int64_t group = shape.n_heads / shape.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < shape.n_heads; ++h) {
    const float* q_head = q + h * shape.head_dim;
    const int64_t kv_offset = (h / group) * shape.head_dim;
    float* head_scores = scores + h * n_positions;
    for (int64_t t = 0; t < n_positions; ++t) {
      const float* k = keys + t * kv_dim + kv_offset;
      float dot = 0.0f;
      for (int64_t i = 0; i < shape.head_dim; ++i) dot += q_head[i] * k[i];
      head_scores[t] = dot * scale;
    }
    softmax(head_scores, n_positions);
    float* out_head = out + h * shape.head_dim;
    for (int64_t i = 0; i < shape.head_dim; ++i) out_head[i] = 0.0f;
    for (int64_t t = 0; t < n_positions; ++t) {
      const float* v = values + t * kv_dim + kv_offset;
      const float weight = head_scores[t];
      for (int64_t i = 0; i < shape.head_dim; ++i) out_head[i] += weight * v[i];
    }
  }
}

}  // namespace cpullm
