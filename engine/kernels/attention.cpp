#include "engine/kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "engine/kernels/attention_rows.hpp"
#include "engine/kernels/dot.hpp"
#include "engine/kernels/gemm.hpp"
#include "engine/kernels/isa.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/ops.hpp"
#include "engine/kernels/parallel.hpp"
#include "engine/kernels/quant_formats.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/util/aligned_vector.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// Where a cache's head rows lie, with KvStrides' zeros (whole-position rows) made explicit.
KvStrides resolved(KvStrides strides, GgmlType kv_type, const AttentionShape& shape) {
  if (!strides.position) strides.position = row_bytes(kv_type, shape.n_kv_heads * shape.head_dim);
  if (!strides.head) strides.head = row_bytes(kv_type, shape.head_dim);
  return strides;
}

// Decode attention splits each query's cache along the positions (split-K): a unit of work is one
// KV head over one segment of kSegment positions, for every query head that reads the KV head.
// Each unit streams only its own rows, so a long cache spreads over the threads however few KV
// heads there are (a Llama 3 model has 8, a server 40 threads), and no row is read from memory
// by two threads (splitting a group's query heads between threads instead made each of them read
// the whole cache of its KV head). Segments are fixed positions, not a share of the threads, so
// every output's arithmetic, and the output bit for bit, is the same at any thread count.
constexpr int64_t kSegment = 512;  // positions per unit: 8 tiles of 64
constexpr int64_t kTileRows = 64;  // positions whose keys every head of a unit scores while in L1

// A unit's result per query head, result_floats(head_dim) floats: the e^(score - m) of the
// segment's positions times their value rows (head_dim values), then the segment's largest score
// m, then the sum of the e^(score - m): a softmax over the segment not yet divided by its sum,
// which merge_segments weighs against the other segments'.
constexpr int64_t result_floats(int64_t head_dim) { return head_dim + 2; }

// One unit: query heads 0 .. heads - 1 from q (head_dim apart), all reading the KV head whose
// row of each position starts at keys and values (rows row_size bytes apart), over n
// positions. Per tile every head scores the same key rows (from L1 after the first), then per
// head its exponentials, then the weighted sum of the value rows, tile by tile. scores (heads,
// n): the thread's buffer; results (heads, result_floats(hd)).
void attend_segment(const AttentionRowKernels& kernels, const float* q, int64_t heads, const std::byte* keys,
                    const std::byte* values, int64_t row_size, int64_t n, int64_t hd, float* scores, float* results) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t stride = result_floats(hd);
  for (int64_t t0 = 0; t0 < n; t0 += kTileRows) {
    const int64_t rows = std::min(kTileRows, n - t0);
    kernels.score(&scores[t0], n, q, heads, keys + t0 * row_size, row_size, rows, hd, scale);
  }
  for (int64_t i = 0; i < heads; ++i) {
    float* s = &scores[i * n];
    float* result = &results[i * stride];
    const float max = max_value(s, n);
    result[hd] = max;
    result[hd + 1] = exp_in_place(s, n, max);
    std::fill_n(result, hd, 0.0f);
  }
  for (int64_t t0 = 0; t0 < n; t0 += kTileRows) {
    const int64_t rows = std::min(kTileRows, n - t0);
    kernels.accumulate(results, stride, &scores[t0], n, heads, values + t0 * row_size, row_size, rows, hd);
  }
}

// out (head_dim) = the softmax-weighted values over all of a head's segments, from their results
// (`segments` of them, `stride` floats apart): each segment's sums and total rescaled from its own
// maximum to the largest, in segment order.
void merge_segments(float* out, const float* results, int64_t segments, int64_t stride, int64_t hd) {
  float max = -INFINITY;
  for (int64_t s = 0; s < segments; ++s) max = std::max(max, results[s * stride + hd]);
  float total = 0.0f;
  std::fill_n(out, hd, 0.0f);
  for (int64_t s = 0; s < segments; ++s) {
    const float* r = &results[s * stride];
    const float weight = std::exp(r[hd] - max);
    total += weight * r[hd + 1];
    for (int64_t d = 0; d < hd; ++d) out[d] += weight * r[d];
  }
  const float inverse = 1.0f / total;
  for (int64_t d = 0; d < hd; ++d) out[d] *= inverse;
}

// Where a query's units and results lie in attention_single_queries' plan.
struct QueryUnits {
  int64_t segments;       // of its seen positions, kSegment each (the last may hold fewer)
  int64_t first_cost;     // the work of the batch's units before this query's, in head-positions
  int64_t first_result;   // its results' first float in the batch's results buffer
};

// Single queries (decode), each over its own sequence's cache, in one parallel loop of units
// (a query's KV head and segment) and, where a query has more than one segment, a second one that
// merges each head's segments. Several sequences' queries share the loops: a decode step of 32
// sequences ran 32 loops a layer, each a job of a few microseconds' work at short contexts. A
// unit's work is its segment's positions times its query heads; each thread takes the units whose
// middle lies in its share of the total work.
void attention_single_queries(std::span<const AttentionQuery> batch, GgmlType kv_type, const AttentionShape& shape,
                              Isa isa) {
  const int64_t hd = shape.head_dim, kv_heads = shape.n_kv_heads;
  const int64_t group = shape.n_heads / kv_heads, stride = result_floats(hd);
  const AttentionRowKernels& kernels = attention_row_kernels(isa, kv_type);
  const int64_t queries = static_cast<int64_t>(batch.size());
  // How many of its positions, the last ones, a query sees: all, or those of the window.
  const auto seen = [window = shape.window](const AttentionQuery& query) {
    return window > 0 ? std::min(query.n_positions, window) : query.n_positions;
  };
  // The last entry holds the batch's totals. Kept from call to call on the calling thread
  // (decode calls this once per layer and step), as are the results of queries of several segments.
  thread_local std::vector<QueryUnits> plan;
  thread_local std::vector<float> results;
  plan.assign(static_cast<std::size_t>(queries) + 1, QueryUnits{});
  bool merge = false;
  for (int64_t q = 0; q < queries; ++q) {
    const int64_t positions = seen(batch[q]), segments = (positions + kSegment - 1) / kSegment;
    merge |= segments > 1;
    plan[q].segments = segments;
    plan[q + 1].first_cost = plan[q].first_cost + kv_heads * group * positions;
    plan[q + 1].first_result = plan[q].first_result + (segments > 1 ? kv_heads * segments * group * stride : 0);
  }
  if (results.size() < static_cast<std::size_t>(plan[queries].first_result))
    results.resize(static_cast<std::size_t>(plan[queries].first_result));
  const AttentionQuery* first_query = batch.data();
  const QueryUnits* units_of = plan.data();
  float* all_results = results.data();
  on_every_thread([=](int thread, int team) {
    // Per-thread buffers kept from call to call: scores (group, kSegment) and the results of a
    // unit that is its query's only segment (group, stride).
    thread_local std::vector<float> scores, own;
    if (scores.size() < static_cast<std::size_t>(group * kSegment)) scores.resize(static_cast<std::size_t>(group * kSegment));
    if (own.size() < static_cast<std::size_t>(group * stride)) own.resize(static_cast<std::size_t>(group * stride));
    const int64_t total = units_of[queries].first_cost;
    const int64_t share_begin = total * thread / team, share_end = total * (thread + 1) / team;
    for (int64_t q = 0; q < queries; ++q) {
      const QueryUnits& units = units_of[q];
      if (units_of[q + 1].first_cost <= share_begin) continue;
      if (units.first_cost >= share_end) break;
      const AttentionQuery& query = first_query[q];
      const int64_t n_positions = seen(query);
      const KvStrides strides = resolved(query.strides, kv_type, shape);
      const int64_t first_row = (query.n_positions - n_positions) * strides.position;  // bytes to the first position seen
      int64_t cost = units.first_cost;  // of the unit below
      for (int64_t kv_head = 0; kv_head < kv_heads; ++kv_head)
        for (int64_t segment = 0; segment < units.segments; ++segment) {
          const int64_t begin = segment * kSegment, n = std::min(kSegment, n_positions - begin);
          const int64_t middle = cost + group * n / 2;  // this thread's when in its share
          cost += group * n;
          if (middle < share_begin || middle >= share_end) continue;
          const int64_t at = first_row + begin * strides.position + kv_head * strides.head;
          float* unit_results = units.segments == 1
                                    ? own.data()
                                    : all_results + units.first_result + (kv_head * units.segments + segment) * group * stride;
          attend_segment(kernels, query.q + kv_head * group * hd, group, static_cast<const std::byte*>(query.keys) + at,
                 static_cast<const std::byte*>(query.values) + at, strides.position, n, hd, scores.data(), unit_results);
          if (units.segments == 1)
            for (int64_t i = 0; i < group; ++i) merge_segments(query.out + (kv_head * group + i) * hd, &own[i * stride], 1, stride, hd);
        }
    }
  });
  if (!merge) return;
  // Each head of a query of several segments: its segments' results lie group * stride floats
  // apart (results are (KV head, segment, head of the group, stride)).
  for_each_share(queries * shape.n_heads, [=](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t q = unit / shape.n_heads, h = unit % shape.n_heads;
      const QueryUnits& units = units_of[q];
      if (units.segments == 1) continue;
      const int64_t kv_head = h / group, i = h % group;
      merge_segments(first_query[q].out + h * hd,
                     all_results + units.first_result + kv_head * units.segments * group * stride + i * stride,
                     units.segments, group * stride, hd);
    }
  });
}

// A tile of queries against a tile of keys is two small matrix products, so both run on the
// GEMM's float micro-kernel of the run's ISA level (gemm.hpp): the scores, (queries, keys) =
// queries . keys^T over head_dim, with the keys packed as panels of R keys (column d's R keys
// side by side, the panel layout); the output, (queries, head_dim) += probabilities . values
// over the tile's keys, with the values packed as panels of R head columns. Each call computes
// up to N queries (the tile's tokens) against one panel. Between the two, each query's online
// softmax: scale, maximum, exponentials, its causal mask and the rescaling of what it had summed.
// The mask sets the probabilities of later keys to zero, and with a sliding window those of keys
// the window has passed; the second product runs over the keys the group's last query sees, so a
// query meets the value rows of at most N - 1 later positions, and of passed ones, times zero
// (which would not hide an infinite or NaN value there). Key tiles that every query of a tile has
// left behind are skipped.
//
// A thread's units are consecutive: the query tiles of one head, then the next head's. Each key
// tile of a KV head is packed once, when a unit first reaches it, and kept for the head's later
// query tiles and for the other query heads of its group (packing every tile again for every query
// tile made bench_kernels attention 1.3-1.6x slower; docs/attention.md). A thread keeps
// the first tiles that fit kKeptPanelBytes and packs the later ones into one spare slot, again
// whenever another tile took it in between: a key tile shorter than a panel is padded to the panel's height (1x1 tiles at
// AVX-512 take 64 keys' room), and over a long context the tiles would take hundreds of MiB a
// thread. Like the GEMM's panel buffers, this memory is outside the memory plan's scratch.
constexpr int64_t kKeptPanelBytes = int64_t{8} << 20;

void attention_tiles(float* out, const float* q, int64_t first_position, int64_t n_queries, const void* keys,
                     const void* values, GgmlType kv_type, const AttentionShape& shape, const AttentionTiles& tiles,
                     Isa isa, KvStrides strides) {
  const int64_t dim = shape.n_heads * shape.head_dim;
  const int64_t group = shape.n_heads / shape.n_kv_heads, hd = shape.head_dim;
  strides = resolved(strides, kv_type, shape);
  const auto* key_rows = static_cast<const std::byte*>(keys);
  const auto* value_rows = static_cast<const std::byte*>(values);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t query_tiles = (n_queries + tiles.queries - 1) / tiles.queries;
  const GemmKernels& gemm = gemm_kernels(isa);
  const int64_t R = gemm.float_rows, N = gemm.float_tokens;
  const int64_t key_width = round_up(tiles.keys, R), value_width = round_up(hd, R);
  const int64_t key_tile_floats = hd * key_width, value_tile_floats = value_width * tiles.keys;
  const int64_t tile_bytes = (key_tile_floats + value_tile_floats) * int64_t{sizeof(float)};
  for_each_share(shape.n_heads * query_tiles, [=, &gemm](int64_t first_unit, int64_t last_unit) {
    // The key tiles this thread's units reach: a range that ends a head reaches its last query tile.
    const bool ends_a_head = first_unit / query_tiles != (last_unit - 1) / query_tiles;
    const int64_t last_query_tile = ends_a_head ? query_tiles - 1 : (last_unit - 1) % query_tiles;
    const int64_t last_key_reached = first_position + std::min(n_queries, (last_query_tile + 1) * tiles.queries);
    const int64_t tiles_reached = (last_key_reached + tiles.keys - 1) / tiles.keys;
    const int64_t slots = std::clamp<int64_t>(kKeptPanelBytes / tile_bytes, 1, tiles_reached);
    const int64_t kept = slots == tiles_reached ? slots : slots - 1;  // tiles [0, kept) keep their slot; the rest share the last
    // Panel rows past a tile's keys or head_dim are computed and dropped (zero until first written).
    AlignedVector<float> key_panels(slots * key_tile_floats, 0.0f);      // per slot (key_width / R) panels of (hd, R)
    AlignedVector<float> value_panels(slots * value_tile_floats, 0.0f);  // per slot (value_width / R) panels of (tile keys, R)
    std::vector<float> staged_keys(tiles.keys * hd), staged_values(tiles.keys * hd);  // (tile keys, hd)
    int64_t packed_kv_head = -1, head_offset = 0;
    std::vector<int64_t> packed(slots, -1);                              // per slot, the key tile of packed_kv_head it holds; -1: none
    std::vector<float> scores(tiles.queries * key_width);                // (query tile, key_width)
    std::vector<float> running_max(tiles.queries), running_sum(tiles.queries);
    std::vector<float> acc(tiles.queries * value_width);                 // (query tile, value_width) unnormalised output
    std::vector<float> scaled(tiles.queries * hd);                       // (query tile, hd): its queries times the softmax scale
    for (int64_t unit = first_unit; unit < last_unit; ++unit) {
      const int64_t h = unit / query_tiles, qt = unit % query_tiles;
      const int64_t q0 = qt * tiles.queries, nq = std::min(tiles.queries, n_queries - q0);
      const int64_t kv_head = h / group;
      if (kv_head != packed_kv_head) {  // another KV head's keys: none of the thread's tiles holds them
        packed_kv_head = kv_head;
        head_offset = kv_head * strides.head;
        std::fill(packed.begin(), packed.end(), -1);
      }
      std::fill(running_max.begin(), running_max.end(), -INFINITY);
      std::fill(running_sum.begin(), running_sum.end(), 0.0f);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t i = 0; i < nq; ++i)
        for (int64_t d = 0; d < hd; ++d) scaled[i * hd + d] = q[(q0 + i) * dim + h * hd + d] * scale;
      const int64_t last_key = first_position + q0 + nq;  // keys [first_key, last_key) can be seen by this tile
      const int64_t first_key = shape.window > 0 ? std::max<int64_t>(0, first_position + q0 - shape.window + 1) : 0;
      for (int64_t k0 = first_key / tiles.keys * tiles.keys; k0 < last_key; k0 += tiles.keys) {
        const int64_t nk = std::min(tiles.keys, last_key - k0);
        const int64_t tile = k0 / tiles.keys, slot = std::min(tile, kept);
        float* tile_keys = &key_panels[slot * key_tile_floats];
        float* tile_values = &value_panels[slot * value_tile_floats];
        if (packed[slot] != tile) {  // the slot holds another tile (or none): pack the whole tile
          // The tile's rows of the KV head, decoded to FP32 (a Q8_0 block's values share a scale, so
          // a panel's columns could not be decoded from the middle of one), then packed.
          const int64_t tile_rows = std::min(k0 + tiles.keys, first_position + n_queries) - k0;
          for (int64_t j = 0; j < tile_rows; ++j) {
            const int64_t at = (k0 + j) * strides.position + head_offset;
            decode_row(kv_type, key_rows + at, &staged_keys[j * hd], hd);
            decode_row(kv_type, value_rows + at, &staged_values[j * hd], hd);
          }
          const WeightMatrix staged{reinterpret_cast<const std::byte*>(staged_keys.data()), GgmlType::F32, tile_rows, hd};
          for (int64_t p = 0; p * R < tile_rows; ++p)
            pack_float_panel(staged, p * R, 0, hd, static_cast<int>(R), tile_keys + p * hd * R);
          for (int64_t j = 0; j < tile_rows; ++j)
            for (int64_t c = 0; c < hd; c += R)
              std::copy_n(&staged_values[j * hd + c], std::min(R, hd - c), tile_values + c * tiles.keys + j * R);
          packed[slot] = tile;
        }
        // Queries before first_seeing see none of this tile's keys (causal).
        const int64_t first_seeing = std::max<int64_t>(0, k0 - first_position - q0);
        for (int64_t i0 = first_seeing; i0 < nq; i0 += N)
          for (int64_t p = 0; p * R < nk; ++p)
            gemm.float_tile({tile_keys + p * hd * R, &scaled[i0 * hd], hd, &scores[i0 * key_width + p * R],
                             key_width, hd, std::min(R, nk - p * R), std::min(N, nq - i0), false});
        for (int64_t i = first_seeing; i < nq; ++i) {
          // Query i sees the tile's keys [begin, end): later keys are masked (causal), and so are
          // earlier ones that a window has passed.
          const int64_t position = first_position + q0 + i;
          const int64_t end = std::min(nk, position - k0 + 1);
          const int64_t begin = shape.window > 0 ? std::clamp<int64_t>(position - shape.window + 1 - k0, 0, end) : 0;
          float* s = &scores[i * key_width];
          std::fill(s, s + begin, 0.0f);
          std::fill(s + end, s + nk, 0.0f);
          if (begin == end) continue;  // the window has passed the whole tile
          float* seen = s + begin;
          const int64_t n = end - begin;
          const float tile_max = max_value(seen, n);  // vectorised: a scalar chain of maxima took a third of the time between the products
          // Online softmax: rescale what was summed under the old maximum to the new one (a
          // maximum that stays, as it mostly does after the first tiles, leaves it as it is).
          if (tile_max > running_max[i]) {
            const float correction = std::exp(running_max[i] - tile_max);
            running_sum[i] *= correction;
            float* acc_i = &acc[i * value_width];
            for (int64_t d = 0; d < hd; ++d) acc_i[d] *= correction;
            running_max[i] = tile_max;
          }
          running_sum[i] += exp_in_place(seen, n, running_max[i]);
        }
        for (int64_t i0 = first_seeing; i0 < nq; i0 += N) {
          const int64_t n = std::min(N, nq - i0);
          const int64_t seen = std::min(nk, first_position + q0 + i0 + n - k0);  // keys the group's last query sees
          for (int64_t c = 0; c < hd; c += R)
            gemm.float_tile({tile_values + c * tiles.keys, &scores[i0 * key_width], key_width, &acc[i0 * value_width + c],
                             value_width, seen, std::min(R, hd - c), n, true});
        }
      }
      for (int64_t i = 0; i < nq; ++i) {
        const float inverse_sum = 1.0f / running_sum[i];
        for (int64_t d = 0; d < hd; ++d) out[(q0 + i) * dim + h * hd + d] = acc[i * value_width + d] * inverse_sum;
      }
    }
  });
}

void require_kv_type(GgmlType kv_type, const AttentionShape& shape) {
  if (!kv_type_supported(kv_type)) fail("a KV cache cannot hold {} values (f32, f16, bf16 or q8_0)", ggml_type_name(kv_type));
  if (kv_type == GgmlType::Q8_0 && shape.head_dim % kQuantBlock != 0)
    fail("a Q8_0 KV cache needs heads of a multiple of {} values, not {}", kQuantBlock, shape.head_dim);
}

}  // namespace

void attention(std::span<const AttentionQuery> queries, GgmlType kv_type, const AttentionShape& shape, Isa isa) {
  require_kv_type(kv_type, shape);
  if (!queries.empty()) attention_single_queries(queries, kv_type, shape, isa);
}

void attention(float* out, const float* q, const void* keys, const void* values, GgmlType kv_type,
               int64_t n_positions, const AttentionShape& shape, Isa isa) {
  const AttentionQuery one{out, q, keys, values, n_positions};
  attention({&one, 1}, kv_type, shape, isa);
}

void attention(float* out, const float* q, const float* keys, const float* values, int64_t n_positions,
               const AttentionShape& shape, Isa isa) {
  attention(out, q, keys, values, GgmlType::F32, n_positions, shape, isa);
}

const AttentionRowKernels& attention_row_kernels(Isa isa, GgmlType kv_type) {
  const AttentionRowTable& table = table_for_isa(isa, scalar_attention_rows, avx2_attention_rows, avx512_attention_rows);
  switch (kv_type) {
    case GgmlType::F32: return table.f32;
    case GgmlType::F16: return table.f16;
    case GgmlType::BF16: return table.bf16;
    case GgmlType::Q8_0: return table.q8_0;
    default: fail("a KV cache cannot hold {} values (f32, f16, bf16 or q8_0)", ggml_type_name(kv_type));
  }
}

void attention_tiled(float* out, const float* q, int64_t first_position, int64_t n_queries, const void* keys,
                     const void* values, GgmlType kv_type, const AttentionShape& shape, const AttentionTiles& tiles,
                     Isa isa, KvStrides strides) {
  require_kv_type(kv_type, shape);
  attention_tiles(out, q, first_position, n_queries, keys, values, kv_type, shape, tiles, isa, strides);
}

void attention_tiled(float* out, const float* q, int64_t first_position, int64_t n_queries, const float* keys,
                     const float* values, const AttentionShape& shape, const AttentionTiles& tiles, Isa isa) {
  attention_tiled(out, q, first_position, n_queries, keys, values, GgmlType::F32, shape, tiles, isa);
}

bool kv_type_supported(GgmlType type) {
  return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16 || type == GgmlType::Q8_0;
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
