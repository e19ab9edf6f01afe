#include "engine/kernels/attention.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "engine/kernels/gemm.hpp"
#include "engine/kernels/isa.hpp"
#include "engine/kernels/ops.hpp"
#include "engine/kernels/parallel.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/util/aligned_vector.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// Both kernels work on tiles of cache rows widened to FP32 once per tile (not element by element
// inside every dot product, which did not vectorise for F16 and BF16). The single query's
// (decode's) works in columns of kChunk floats held in four `Lanes` (ops.hpp: 8 floats, an AVX2
// register at the baseline) across each inner loop, its scores (score_rows) in AVX2 directly, for
// the horizontal adds. The tiled kernel (prefill) packs its tiles for the GEMM's micro-kernel.
constexpr int64_t kVectors = 4, kChunk = kLanes * kVectors;
int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// out (width) += sum over k < n of coefficients[k] * rows[k, .]; rows (n, width), width a
// multiple of kChunk: a query's output, its probabilities times the value rows. Even and odd k
// sum apart: eight chains of FMAs, not four, so none waits on the last's
// latency.
void accumulate_rows(float* out, const float* coefficients, const float* rows, int64_t n, int64_t width) {
  for (int64_t c0 = 0; c0 < width; c0 += kChunk) {
    Lanes even[kVectors], odd[kVectors] = {};
    for (int64_t v = 0; v < kVectors; ++v) even[v] = load_lanes(out + c0 + v * kLanes);
    int64_t k = 0;
    for (; k + 2 <= n; k += 2) {
      const Lanes first = Lanes{} + coefficients[k], second = Lanes{} + coefficients[k + 1];
      const float* row = rows + k * width + c0;
      for (int64_t v = 0; v < kVectors; ++v) {
        even[v] += first * load_lanes(row + v * kLanes);
        odd[v] += second * load_lanes(row + width + v * kLanes);
      }
    }
    if (k < n)
      for (int64_t v = 0; v < kVectors; ++v) even[v] += (Lanes{} + coefficients[k]) * load_lanes(rows + k * width + c0 + v * kLanes);
    for (int64_t v = 0; v < kVectors; ++v) store_lanes(out + c0 + v * kLanes, even[v] + odd[v]);
  }
}

// scores[j] = scale * (q . rows[j]) for j < n; rows (at least n rounded up to 8, width), width
// a multiple of 8; the rows past n are read and their scores dropped. Eight rows at a
// time, each with its own accumulator, and the eight reduced together by hadds and one lane
// swap: one dot product per row spent more instructions on reducing its accumulator to a float
// than on its products (head_dim 64: 8 FMAs, then about 11 reduction steps).
void score_rows(float* scores, const float* q, const float* rows, int64_t n, int64_t width, float scale) {
  for (int64_t j = 0; j < n; j += 8) {
    __m256 acc[8];
    for (__m256& a : acc) a = _mm256_setzero_ps();
    for (int64_t c = 0; c < width; c += 8) {
      const __m256 q_c = _mm256_loadu_ps(q + c);
      for (int64_t r = 0; r < 8; ++r) acc[r] = _mm256_fmadd_ps(q_c, _mm256_loadu_ps(rows + (j + r) * width + c), acc[r]);
    }
    // hadd(a, b) = a0+a1 a2+a3 b0+b1 b2+b3 | a4+a5 a6+a7 b4+b5 b6+b7: two rounds leave rows 0-3's
    // sums of lanes 0-3 in the low half and of lanes 4-7 in the high one.
    const __m256 rows_0123 = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
    const __m256 rows_4567 = _mm256_hadd_ps(_mm256_hadd_ps(acc[4], acc[5]), _mm256_hadd_ps(acc[6], acc[7]));
    const __m256 sums = _mm256_add_ps(_mm256_permute2f128_ps(rows_0123, rows_4567, 0x20),
                                      _mm256_permute2f128_ps(rows_0123, rows_4567, 0x31));
    alignas(32) float eight[8];
    _mm256_store_ps(eight, _mm256_mul_ps(sums, _mm256_set1_ps(scale)));
    std::copy_n(eight, std::min<int64_t>(8, n - j), scores + j);
  }
}

// rows (n, width) = n consecutive cache rows' head at `offset`, widened to FP32; columns past
// head_dim stay as they were (zero).
void widen_rows(float* rows, const std::byte* cache, GgmlType kv_type, int64_t row_size, int64_t offset, int64_t n,
                int64_t head_dim, int64_t width) {
  for (int64_t j = 0; j < n; ++j) decode_row(kv_type, cache + j * row_size + offset, rows + j * width, head_dim);
}

// How attention_single_queries splits one query into units: its KV heads, each split into runs of
// the query heads that read it.
struct QueryUnits {
  int64_t splits;          // runs of query heads per KV head
  int64_t heads_per_unit;  // query heads a run holds (the last run of a group may hold fewer)
  int64_t first_cost;      // the work of the batch's units before this query's, in head-positions
};

// Single queries (decode), each over its own sequence's cache, in one parallel loop. A unit of
// work is a query's KV head and a run of the query heads that read it: each tile of the KV head's
// cache rows is widened to FP32 once for all of them (TinyLlama's 8 query heads per KV head
// widened every row 8 times when each head was a unit of its own), then per head the scores, a
// softmax and the weighted sum of the values. Several sequences' queries share one loop: a decode
// step of 32 sequences ran 32 loops a layer, each a job of a few microseconds' work at short
// contexts. Work grows with a query's context, so a query's groups are split as far as its share
// of the batch's positions needs threads (a long context among short ones gets as many as it would
// alone), and each thread takes the units whose middle lies in its share of the total work. Each
// head's arithmetic is the same in any unit, so the output depends on neither the thread count nor
// the batch.
void attention_single_queries(std::span<const AttentionQuery> batch, GgmlType kv_type, const AttentionShape& shape) {
  const int64_t kv_dim = shape.n_kv_heads * shape.head_dim, hd = shape.head_dim, kv_heads = shape.n_kv_heads;
  const int64_t group = shape.n_heads / kv_heads;
  const int64_t row_size = row_bytes(kv_type, kv_dim), head_size = row_bytes(kv_type, hd);
  const int64_t width = round_up(hd, kChunk);
  constexpr int64_t kRows = 64;  // cache rows widened at a time
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t queries = static_cast<int64_t>(batch.size()), threads = parallel_threads();
  // How many of its positions, the last ones, a query sees: all, or those of the window.
  const auto seen = [window = shape.window](const AttentionQuery& query) {
    return window > 0 ? std::min(query.n_positions, window) : query.n_positions;
  };
  int64_t all_positions = 0, most_positions = 0;
  for (const AttentionQuery& query : batch)
    all_positions += seen(query), most_positions = std::max(most_positions, seen(query));
  // The last entry holds the batch's total work. Kept from call to call on the calling thread
  // (decode calls this once per layer and step).
  thread_local std::vector<QueryUnits> plan;
  plan.assign(static_cast<std::size_t>(queries) + 1, QueryUnits{});
  for (int64_t q = 0; q < queries; ++q) {
    const int64_t positions = seen(batch[q]);
    const int64_t wanted = (threads * positions + all_positions * kv_heads - 1) / (all_positions * kv_heads);
    const int64_t splits = std::clamp<int64_t>(wanted, 1, group), heads_per_unit = (group + splits - 1) / splits;
    plan[q] = {splits, heads_per_unit, plan[q].first_cost};
    plan[q + 1].first_cost = plan[q].first_cost + kv_heads * splits * heads_per_unit * positions;
  }
  const AttentionQuery* first_query = batch.data();
  const QueryUnits* units_of = plan.data();
  on_every_thread([=](int thread, int team) {
    // Per-thread buffers kept from call to call (decode calls this once per layer and step),
    // zeroed again when the head size changes: only then could a padding column hold a value.
    thread_local std::vector<float> rows, head_queries, sums, scores;  // (kRows, width), (group, width) twice, (group, positions)
    thread_local int64_t zeroed_for_head_dim = -1;
    if (zeroed_for_head_dim != hd || head_queries.size() < static_cast<std::size_t>(group * width)) {
      rows.assign(kRows * width, 0.0f), head_queries.assign(group * width, 0.0f), sums.assign(group * width, 0.0f);
      zeroed_for_head_dim = hd;
    }
    if (scores.size() < static_cast<std::size_t>(group * most_positions))
      scores.resize(static_cast<std::size_t>(group * most_positions));
    const int64_t total = units_of[queries].first_cost;
    const int64_t share_begin = total * thread / team, share_end = total * (thread + 1) / team;
    for (int64_t q = 0; q < queries; ++q) {
      const QueryUnits& units = units_of[q];
      if (units_of[q + 1].first_cost <= share_begin) continue;
      if (units.first_cost >= share_end) break;
      const AttentionQuery& query = first_query[q];
      const int64_t n_positions = seen(query), unit_cost = units.heads_per_unit * n_positions;
      const int64_t first_row = (query.n_positions - n_positions) * row_size;  // bytes to the first position seen
      const auto* keys = static_cast<const std::byte*>(query.keys) + first_row;
      const auto* values = static_cast<const std::byte*>(query.values) + first_row;
      for (int64_t local = 0; local < kv_heads * units.splits; ++local) {
        const int64_t middle = units.first_cost + local * unit_cost + unit_cost / 2;  // this thread's when in its share
        if (middle < share_begin || middle >= share_end) continue;
        const int64_t kv_head = local / units.splits, first = kv_head * group + local % units.splits * units.heads_per_unit;
        const int64_t heads = std::min(units.heads_per_unit, (kv_head + 1) * group - first);
        if (heads <= 0) continue;  // the group split into fewer runs than units
        const int64_t kv_offset = kv_head * head_size;
        for (int64_t i = 0; i < heads; ++i) std::copy_n(query.q + (first + i) * hd, hd, &head_queries[i * width]);
        for (int64_t t0 = 0; t0 < n_positions; t0 += kRows) {
          const int64_t n = std::min(kRows, n_positions - t0);
          widen_rows(rows.data(), keys + t0 * row_size, kv_type, row_size, kv_offset, n, hd, width);
          for (int64_t i = 0; i < heads; ++i)
            score_rows(&scores[i * n_positions + t0], &head_queries[i * width], rows.data(), n, width, scale);
        }
        for (int64_t i = 0; i < heads; ++i) softmax(&scores[i * n_positions], n_positions);
        std::fill_n(sums.begin(), heads * width, 0.0f);
        for (int64_t t0 = 0; t0 < n_positions; t0 += kRows) {
          const int64_t n = std::min(kRows, n_positions - t0);
          widen_rows(rows.data(), values + t0 * row_size, kv_type, row_size, kv_offset, n, hd, width);
          for (int64_t i = 0; i < heads; ++i)
            accumulate_rows(&sums[i * width], &scores[i * n_positions + t0], rows.data(), n, width);
        }
        for (int64_t i = 0; i < heads; ++i) std::copy_n(&sums[i * width], hd, query.out + (first + i) * hd);
      }
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
                     Isa isa) {
  const int64_t dim = shape.n_heads * shape.head_dim, kv_dim = shape.n_kv_heads * shape.head_dim;
  const int64_t group = shape.n_heads / shape.n_kv_heads, hd = shape.head_dim;
  const int64_t row_size = row_bytes(kv_type, kv_dim), element_size = row_bytes(kv_type, 1);
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
    int64_t packed_kv_head = -1;
    std::vector<int64_t> packed(slots, -1);                              // per slot, the key tile of packed_kv_head it holds; -1: none
    std::vector<float> scores(tiles.queries * key_width);                // (query tile, key_width)
    std::vector<float> running_max(tiles.queries), running_sum(tiles.queries);
    std::vector<float> acc(tiles.queries * value_width);                 // (query tile, value_width) unnormalised output
    for (int64_t unit = first_unit; unit < last_unit; ++unit) {
      const int64_t h = unit / query_tiles, qt = unit % query_tiles;
      const int64_t q0 = qt * tiles.queries, nq = std::min(tiles.queries, n_queries - q0);
      const int64_t kv_head = h / group;
      if (kv_head != packed_kv_head) {  // another KV head's keys: none of the thread's tiles holds them
        packed_kv_head = kv_head;
        std::fill(packed.begin(), packed.end(), -1);
      }
      std::fill(running_max.begin(), running_max.end(), -INFINITY);
      std::fill(running_sum.begin(), running_sum.end(), 0.0f);
      std::fill(acc.begin(), acc.end(), 0.0f);
      const int64_t last_key = first_position + q0 + nq;  // keys [first_key, last_key) can be seen by this tile
      const int64_t first_key = shape.window > 0 ? std::max<int64_t>(0, first_position + q0 - shape.window + 1) : 0;
      for (int64_t k0 = first_key / tiles.keys * tiles.keys; k0 < last_key; k0 += tiles.keys) {
        const int64_t nk = std::min(tiles.keys, last_key - k0);
        const int64_t tile = k0 / tiles.keys, slot = std::min(tile, kept);
        float* tile_keys = &key_panels[slot * key_tile_floats];
        float* tile_values = &value_panels[slot * value_tile_floats];
        if (packed[slot] != tile) {  // the slot holds another tile (or none): pack the whole tile
          const int64_t tile_end = std::min(k0 + tiles.keys, first_position + n_queries);
          const WeightMatrix cached_keys{static_cast<const std::byte*>(keys), kv_type, tile_end, kv_dim};
          for (int64_t p = 0; p * R < tile_end - k0; ++p)
            pack_float_panel(cached_keys, k0 + p * R, kv_head * hd, hd, static_cast<int>(R), tile_keys + p * hd * R);
          for (int64_t j = 0; j < tile_end - k0; ++j)
            for (int64_t c = 0; c < hd; c += R)
              decode_row(kv_type, value_rows + (k0 + j) * row_size + (kv_head * hd + c) * element_size,
                         tile_values + c * tiles.keys + j * R, std::min(R, hd - c));
          packed[slot] = tile;
        }
        // Queries before first_seeing see none of this tile's keys (causal).
        const int64_t first_seeing = std::max<int64_t>(0, k0 - first_position - q0);
        for (int64_t i0 = first_seeing; i0 < nq; i0 += N)
          for (int64_t p = 0; p * R < nk; ++p)
            gemm.float_tile({tile_keys + p * hd * R, q + (q0 + i0) * dim + h * hd, dim, &scores[i0 * key_width + p * R],
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
          for (int64_t j = 0; j < n; ++j) seen[j] *= scale;
          const float tile_max = max_value(seen, n);  // vectorised: a scalar chain of maxima took a third of the time between the products
          // Online softmax: rescale what was summed under the old maximum to the new one.
          const float new_max = std::max(running_max[i], tile_max);
          const float correction = std::exp(running_max[i] - new_max);
          for (int64_t j = 0; j < n; ++j) seen[j] -= new_max;
          running_sum[i] = running_sum[i] * correction + exp_in_place(seen, n);
          running_max[i] = new_max;
          float* acc_i = &acc[i * value_width];
          for (int64_t d = 0; d < hd; ++d) acc_i[d] *= correction;
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

void require_kv_type(GgmlType kv_type) {
  if (!kv_type_supported(kv_type)) fail("a KV cache cannot hold {} values (f32, f16 or bf16)", ggml_type_name(kv_type));
}

}  // namespace

void attention(std::span<const AttentionQuery> queries, GgmlType kv_type, const AttentionShape& shape) {
  require_kv_type(kv_type);
  if (!queries.empty()) attention_single_queries(queries, kv_type, shape);
}

void attention(float* out, const float* q, const void* keys, const void* values, GgmlType kv_type,
               int64_t n_positions, const AttentionShape& shape) {
  const AttentionQuery one{out, q, keys, values, n_positions};
  attention({&one, 1}, kv_type, shape);
}

void attention(float* out, const float* q, const float* keys, const float* values, int64_t n_positions,
               const AttentionShape& shape) {
  attention(out, q, keys, values, GgmlType::F32, n_positions, shape);
}

void attention_tiled(float* out, const float* q, int64_t first_position, int64_t n_queries, const void* keys,
                     const void* values, GgmlType kv_type, const AttentionShape& shape, const AttentionTiles& tiles,
                     Isa isa) {
  require_kv_type(kv_type);
  attention_tiles(out, q, first_position, n_queries, keys, values, kv_type, shape, tiles, isa);
}

void attention_tiled(float* out, const float* q, int64_t first_position, int64_t n_queries, const float* keys,
                     const float* values, const AttentionShape& shape, const AttentionTiles& tiles, Isa isa) {
  attention_tiled(out, q, first_position, n_queries, keys, values, GgmlType::F32, shape, tiles, isa);
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
