#include "engine/kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "engine/kernels/ops.hpp"
#include "engine/util/error.hpp"
#include "engine/util/half.hpp"

namespace cpullm {
namespace {

// The cache's element types. Each kernel below is written once over `Element` and widens each
// key or value to FP32 as it reads it (F16C and a shift vectorise inside the loops).
struct Fp16Value { uint16_t bits; };
struct Bf16Value { uint16_t bits; };
inline float widen(float v) { return v; }
inline float widen(Fp16Value v) { return fp16_to_fp32(v.bits); }
inline float widen(Bf16Value v) { return bf16_to_fp32(v.bits); }

// Calls body(Element{}) with the element type of kv_type.
template <typename Body>
void with_kv_element(GgmlType kv_type, Body&& body) {
  switch (kv_type) {
    case GgmlType::F32: return body(float{});
    case GgmlType::F16: return body(Fp16Value{});
    case GgmlType::BF16: return body(Bf16Value{});
    default: fail("a KV cache cannot hold {} values (f32, f16 or bf16)", ggml_type_name(kv_type));
  }
}

template <typename Element>
void attention_one_query(float* out, const float* q, const Element* keys, const Element* values, int64_t n_positions,
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
      const Element* k = keys + t * kv_dim + kv_offset;
      float dot = 0.0f;
      for (int64_t i = 0; i < shape.head_dim; ++i) dot += q_head[i] * widen(k[i]);
      head_scores[t] = dot * scale;
    }
    softmax(head_scores, n_positions);
    float* out_head = out + h * shape.head_dim;
    for (int64_t i = 0; i < shape.head_dim; ++i) out_head[i] = 0.0f;
    for (int64_t t = 0; t < n_positions; ++t) {
      const Element* v = values + t * kv_dim + kv_offset;
      const float weight = head_scores[t];
      for (int64_t i = 0; i < shape.head_dim; ++i) out_head[i] += weight * widen(v[i]);
    }
  }
}

template <typename Element>
void attention_tiles(float* out, const float* q, int64_t first_position, int64_t n_queries, const Element* keys,
                     const Element* values, const AttentionShape& shape, const AttentionTiles& tiles) {
  const int64_t dim = shape.n_heads * shape.head_dim, kv_dim = shape.n_kv_heads * shape.head_dim;
  const int64_t group = shape.n_heads / shape.n_kv_heads, hd = shape.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t query_tiles = (n_queries + tiles.queries - 1) / tiles.queries;
#pragma omp parallel
  {
    std::vector<float> scores(tiles.queries * tiles.keys);  // (query tile, key tile)
    std::vector<float> running_max(tiles.queries), running_sum(tiles.queries);
    std::vector<float> acc(tiles.queries * hd);             // (query tile, head_dim) unnormalised output
#pragma omp for collapse(2) schedule(static)
    for (int64_t h = 0; h < shape.n_heads; ++h)
      for (int64_t qt = 0; qt < query_tiles; ++qt) {
        const int64_t q0 = qt * tiles.queries, nq = std::min(tiles.queries, n_queries - q0);
        const int64_t kv_offset = (h / group) * hd;
        std::fill(running_max.begin(), running_max.end(), -INFINITY);
        std::fill(running_sum.begin(), running_sum.end(), 0.0f);
        std::fill(acc.begin(), acc.end(), 0.0f);
        const int64_t last_key = first_position + q0 + nq;  // keys [0, last_key) can be seen by this tile
        for (int64_t k0 = 0; k0 < last_key; k0 += tiles.keys) {
          const int64_t nk = std::min(tiles.keys, last_key - k0);
          for (int64_t i = 0; i < nq; ++i) {
            const float* qi = q + (q0 + i) * dim + h * hd;
            const int64_t position = first_position + q0 + i;
            float tile_max = -INFINITY;
            for (int64_t j = 0; j < nk; ++j) {
              float s = -INFINITY;  // causal: a key after the query is masked out
              if (k0 + j <= position) {
                const Element* kj = keys + (k0 + j) * kv_dim + kv_offset;
                float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                for (int64_t d = 0; d < hd; ++d) dot += qi[d] * widen(kj[d]);
                s = dot * scale;
              }
              scores[i * tiles.keys + j] = s;
              tile_max = std::max(tile_max, s);
            }
            if (tile_max == -INFINITY) continue;  // the whole tile lies after this query
            // Online softmax: rescale what was summed under the old maximum to the new one.
            const float new_max = std::max(running_max[i], tile_max);
            const float correction = std::exp(running_max[i] - new_max);
            running_sum[i] *= correction;
            float* acc_i = acc.data() + i * hd;
            for (int64_t d = 0; d < hd; ++d) acc_i[d] *= correction;
            for (int64_t j = 0; j < nk; ++j) {
              const float p = std::exp(scores[i * tiles.keys + j] - new_max);  // 0 for masked keys
              if (p == 0.0f) continue;
              running_sum[i] += p;
              const Element* vj = values + (k0 + j) * kv_dim + kv_offset;
              for (int64_t d = 0; d < hd; ++d) acc_i[d] += p * widen(vj[d]);
            }
            running_max[i] = new_max;
          }
        }
        for (int64_t i = 0; i < nq; ++i)
          for (int64_t d = 0; d < hd; ++d) out[(q0 + i) * dim + h * hd + d] = acc[i * hd + d] / running_sum[i];
      }
  }
}

}  // namespace

void attention(float* out, const float* q, const void* keys, const void* values, GgmlType kv_type,
               int64_t n_positions, const AttentionShape& shape, float* scores) {
  with_kv_element(kv_type, [&](auto element) {
    using Element = decltype(element);
    attention_one_query(out, q, static_cast<const Element*>(keys), static_cast<const Element*>(values), n_positions,
                        shape, scores);
  });
}

void attention(float* out, const float* q, const float* keys, const float* values, int64_t n_positions,
               const AttentionShape& shape, float* scores) {
  attention(out, q, keys, values, GgmlType::F32, n_positions, shape, scores);
}

void attention_tiled(float* out, const float* q, int64_t first_position, int64_t n_queries, const void* keys,
                     const void* values, GgmlType kv_type, const AttentionShape& shape, const AttentionTiles& tiles) {
  with_kv_element(kv_type, [&](auto element) {
    using Element = decltype(element);
    attention_tiles(out, q, first_position, n_queries, static_cast<const Element*>(keys),
                    static_cast<const Element*>(values), shape, tiles);
  });
}

void attention_tiled(float* out, const float* q, int64_t first_position, int64_t n_queries, const float* keys,
                     const float* values, const AttentionShape& shape, const AttentionTiles& tiles) {
  attention_tiled(out, q, first_position, n_queries, keys, values, GgmlType::F32, shape, tiles);
}

bool kv_type_supported(GgmlType type) {
  return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16;
}

AttentionTiles parse_attention_tiles(const std::string& text) {
  AttentionTiles tiles;
  char x = 0, rest = 0;
  long long queries = 0, keys = 0;
  if (std::sscanf(text.c_str(), "%lld%c%lld%c", &queries, &x, &keys, &rest) != 3 || x != 'x' || queries < 1 ||
      queries > 128 || keys < 1 || keys > 128)
    fail("attention tile '{}' must be QUERIESxKEYS with each from 1 to 128 (e.g. 8x8)", text);
  tiles.queries = queries;
  tiles.keys = keys;
  return tiles;
}

}  // namespace cpullm
