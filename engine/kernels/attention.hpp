// Causal self-attention over the KV cache, with grouped-query heads. The cache holds F32, F16,
// BF16 or Q8_0 values (--kv-type; Q8_0 with head_dim a multiple of 32); queries, sums and
// outputs are FP32 whatever it holds.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "engine/format/ggml_types.hpp"
#include "engine/kernels/isa.hpp"

namespace cpullm {

struct AttentionShape {
  int64_t n_heads;     // query heads
  int64_t n_kv_heads;  // key/value heads; query head h reads kv head h / (n_heads / n_kv_heads)
  int64_t head_dim;
  int64_t window = 0;  // sliding window: the query at position p sees (p - window, p]; 0: [0, p]
};

// out (n_heads, head_dim) = softmax(q . K^T / sqrt(head_dim)) . V over positions [0, n_positions),
// or the last `window` of them, on the row kernels of `isa` (attention_rows.hpp).
// keys, values: (n_positions, n_kv_heads * head_dim), one row per cached position.
void attention(float* out, const float* q, const float* keys, const float* values, int64_t n_positions,
               const AttentionShape& shape, Isa isa);
// The same over a cache of kv_type (F32, F16, BF16 or Q8_0) values.
void attention(float* out, const float* q, const void* keys, const void* values, GgmlType kv_type,
               int64_t n_positions, const AttentionShape& shape, Isa isa);

// Where a cache's head rows lie: kv head h's row of position p at h * head + p * position bytes.
// Zeros: rows of whole positions, (positions, n_kv_heads * head_dim), as the functions above take
// them. The KV cache keeps each head's positions together (position = one head's row), so that
// a unit of decode streams consecutive bytes (kv_cache.hpp).
struct KvStrides {
  int64_t position = 0;  // bytes from a position's head row to the next position's
  int64_t head = 0;      // bytes from a head's row to the next head's, at one position
};

// One query of a batch of single queries, each over its own sequence's cache (a decode step of
// several sequences): the arguments of the one-query attention above.
struct AttentionQuery {
  float* out;           // (n_heads, head_dim)
  const float* q;       // (n_heads, head_dim)
  const void* keys;     // n_positions rows of each KV head, of kv_type, laid out as `strides` says
  const void* values;   // likewise
  int64_t n_positions;  // positions 0 .. n_positions - 1 attended (the last shape.window of them, with a window)
  KvStrides strides = {};
};
// Every query's attention in one parallel loop; each output is the one-query call's, bit for bit.
void attention(std::span<const AttentionQuery> queries, GgmlType kv_type, const AttentionShape& shape, Isa isa);

// Tile sizes of attention_tiled: `queries` query positions meet `keys` cached positions at a
// time. The seed chose 8 x 8; 128 x 128 measured fastest (docs/attention.md), so it is the default.
struct AttentionTiles {
  int64_t queries = 128;
  int64_t keys = 128;
};
inline constexpr const char* kDefaultAttentionTiles = "128x128";  // AttentionTiles{} as --attn-tile writes it
AttentionTiles parse_attention_tiles(const std::string& text);  // "8x8"; 1..128 each, else an Error

// Causal attention of n_queries consecutive positions first_position.. at once (prefill), each
// within the shape's window if it has one:
// out (n_queries, n_heads * head_dim), q (n_queries, n_heads * head_dim), keys/values as above
// holding at least first_position + n_queries rows. Tile by tile with an online softmax: for each
// query the running maximum and sum rescale what was accumulated so far, so no
// (queries x positions) score matrix exists and a tile of keys is read once per tile of queries.
// The tiles' products run on the GEMM micro-kernel of `isa`.
void attention_tiled(float* out, const float* q, int64_t first_position, int64_t n_queries, const float* keys,
                     const float* values, const AttentionShape& shape, const AttentionTiles& tiles, Isa isa);
void attention_tiled(float* out, const float* q, int64_t first_position, int64_t n_queries, const void* keys,
                     const void* values, GgmlType kv_type, const AttentionShape& shape, const AttentionTiles& tiles,
                     Isa isa, KvStrides strides = {});

// Whether the kernels can attend over a cache of this type (F32, F16, BF16, Q8_0).
bool kv_type_supported(GgmlType type);

}  // namespace cpullm
