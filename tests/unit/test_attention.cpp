// Tiled attention with an online softmax against plain attention, query by query, at the
// issue's sequence lengths and at tile sizes from 1x1 to 128x128 (including sizes that do not
// divide the sequence), without and with sliding windows (shorter and longer than a key tile). Both sum in FP32 in different orders and the tiled one rescales its sums
// as the maximum moves: outputs (weighted means of values in [-1, 1]) agree within 2e-5. The
// tiles run on the GEMM's float micro-kernel, so at every ISA level.
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>
#include <random>
#include <vector>

#include "engine/kernels/attention.hpp"
#include "engine/kernels/attention_rows.hpp"
#include "engine/kernels/isa.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/util/error.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

struct Case {
  int64_t sequence;       // cached positions after the queries ran
  int64_t queries;        // how many of the last positions are queries
  AttentionTiles tiles;
  int64_t head_dim = 64;
  GgmlType kv_type = GgmlType::F32;
  int64_t window = 0;     // sliding window; 0: none
};

// The cache as kv_type stores it (rows of kv_dim values), and its values widened back.
std::vector<std::byte> encode_cache(GgmlType type, std::vector<float>& values, int64_t rows, int64_t kv_dim) {
  const int64_t row_size = row_bytes(type, kv_dim);
  std::vector<std::byte> cache(rows * row_size);
  for (int64_t r = 0; r < rows; ++r) {
    encode_row(type, &values[r * kv_dim], &cache[r * row_size], kv_dim);
    decode_row(type, &cache[r * row_size], &values[r * kv_dim], kv_dim);
  }
  return cache;
}

class TiledAttention : public ::testing::TestWithParam<Case> {};

TEST_P(TiledAttention, MatchesPlainAttention) {
  const Case c = GetParam();
  const AttentionShape shape{8, 2, c.head_dim, c.window};  // grouped-query: 4 query heads per KV head
  const int64_t dim = shape.n_heads * shape.head_dim, kv_dim = shape.n_kv_heads * shape.head_dim;
  const int64_t first = c.sequence - c.queries;
  std::mt19937 rng(static_cast<unsigned>(c.sequence + c.tiles.queries * 131 + c.tiles.keys));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> q(c.queries * dim), keys(c.sequence * kv_dim), values(c.sequence * kv_dim);
  for (float& v : q) v = normal(rng);
  for (float& v : keys) v = normal(rng);
  for (float& v : values) v = uniform(rng);

  const std::vector<std::byte> key_cache = encode_cache(c.kv_type, keys, c.sequence, kv_dim);
  const std::vector<std::byte> value_cache = encode_cache(c.kv_type, values, c.sequence, kv_dim);

  std::vector<float> plain(c.queries * dim);
  for (int64_t i = 0; i < c.queries; ++i)
    attention(&plain[i * dim], q.data() + i * dim, key_cache.data(), value_cache.data(), c.kv_type, first + i + 1, shape,
              Isa::Avx2);
  const int threads_before = omp_get_max_threads();
  // One thread packs every key tile once per KV head; three split some heads' query tiles between
  // threads, so a thread starts mid-head and packs the tiles its first unit needs.
  for (int threads : {1, 3})
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {  // the tiles run on that level's GEMM micro-kernel
      if (!cpu_supports(isa)) continue;
      omp_set_num_threads(threads);
      std::vector<float> tiled(c.queries * dim);
      attention_tiled(tiled.data(), q.data(), first, c.queries, key_cache.data(), value_cache.data(), c.kv_type, shape,
                      c.tiles, isa);
      omp_set_num_threads(threads_before);
      for (int64_t i = 0; i < c.queries * dim; ++i)
        ASSERT_NEAR(tiled[i], plain[i], 2e-5) << isa_name(isa) << ", " << threads << " threads, query "
                                              << first + i / dim << " element " << i % dim;
    }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (AttentionTiles tiles : {AttentionTiles{1, 1}, AttentionTiles{8, 8}, AttentionTiles{16, 64},
                               AttentionTiles{128, 128}, AttentionTiles{7, 13}}) {
    out.push_back({512, 512, tiles});   // a 512-token prompt from position 0
    out.push_back({2048, 96, tiles});   // the last chunk of a 2048-token context
  }
  // The cache's other types, and head sizes off the kernels' 32-float columns (stories260K's 8).
  out.push_back({512, 512, {64, 64}, 64, GgmlType::F16});
  out.push_back({2048, 96, {7, 13}, 64, GgmlType::BF16});
  out.push_back({300, 300, {16, 64}, 48, GgmlType::F16});
  out.push_back({200, 200, {64, 64}, 8, GgmlType::F32});
  out.push_back({300, 300, {16, 64}, 12, GgmlType::F16});  // 8 columns and a tail of 4
  out.push_back({200, 200, {8, 8}, 40, GgmlType::BF16});   // 32 columns and 8
  out.push_back({300, 300, {16, 64}, 64, GgmlType::Q8_0});
  out.push_back({700, 200, {7, 13}, 96, GgmlType::Q8_0});  // 3 blocks a head, panel columns across a block
  // More 1x1 key tiles than a thread keeps packed at every level (each padded to a panel): the
  // first stay packed, the rest are packed again by every unit into the spare slot.
  out.push_back({4200, 29, {1, 1}});
  // Sliding windows: inside one key tile, across several, and queries starting past the window
  // (their first key tiles skipped, the packed ones of earlier query tiles reused or not).
  out.push_back({512, 512, {64, 64}, 64, GgmlType::F32, 20});
  out.push_back({512, 512, {8, 8}, 64, GgmlType::F16, 20});
  out.push_back({300, 300, {7, 13}, 48, GgmlType::F32, 100});
  out.push_back({2048, 96, {16, 64}, 64, GgmlType::BF16, 200});
  out.push_back({200, 200, {1, 1}, 8, GgmlType::F32, 3});
  out.push_back({4200, 29, {1, 1}, 64, GgmlType::F32, 1});
  return out;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return "seq" + std::to_string(c.sequence) + "_q" + std::to_string(c.queries) + "_tile" +
         std::to_string(c.tiles.queries) + "x" + std::to_string(c.tiles.keys) + "_hd" + std::to_string(c.head_dim) + "_" +
         std::string(ggml_type_name(c.kv_type)) + (c.window ? "_window" + std::to_string(c.window) : "");
}

INSTANTIATE_TEST_SUITE_P(Cases, TiledAttention, ::testing::ValuesIn(cases()), case_name);

// A decode step of several sequences: every query over its own cache, of its own length (from
// one position to past two 64-row tiles), in one call, gives each query's one-query output bit for
// bit, at any thread count (1 thread: units in order; 2, 3 and 5: split across queries, KV heads
// and query heads), for every cache type, without and with a sliding window shorter than some
// of the caches.
TEST(SingleQueries, BatchGivesEachQueryItsOwnOutput) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
  if (!cpu_supports(isa)) continue;
  for (int64_t window : {0, 100}) {
    const AttentionShape shape{8, 2, 64, window};
    const int64_t dim = shape.n_heads * shape.head_dim, kv_dim = shape.n_kv_heads * shape.head_dim;
    const std::vector<int64_t> lengths = {1, 7, 64, 65, 150, 3, 1000};  // 1000: its groups split further
    for (GgmlType kv_type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0}) {
      std::mt19937 rng(static_cast<unsigned>(kv_type) + 5);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<std::vector<float>> q(lengths.size(), std::vector<float>(dim));
      std::vector<std::vector<std::byte>> key_caches, value_caches;
      for (std::size_t s = 0; s < lengths.size(); ++s) {
        for (float& x : q[s]) x = normal(rng);
        std::vector<float> keys(lengths[s] * kv_dim), values(lengths[s] * kv_dim);
        for (auto* v : {&keys, &values})
          for (float& x : *v) x = normal(rng);
        key_caches.push_back(encode_cache(kv_type, keys, lengths[s], kv_dim));
        value_caches.push_back(encode_cache(kv_type, values, lengths[s], kv_dim));
      }
      std::vector<std::vector<float>> alone(lengths.size(), std::vector<float>(dim));
      for (std::size_t s = 0; s < lengths.size(); ++s)
        attention(alone[s].data(), q[s].data(), key_caches[s].data(), value_caches[s].data(), kv_type, lengths[s], shape,
                  isa);
      const int threads_before = omp_get_max_threads();
      for (int threads : {1, 2, 3, 5}) {
        omp_set_num_threads(threads);
        std::vector<std::vector<float>> together(lengths.size(), std::vector<float>(dim, -7.0f));
        std::vector<AttentionQuery> batch;
        for (std::size_t s = 0; s < lengths.size(); ++s)
          batch.push_back({together[s].data(), q[s].data(), key_caches[s].data(), value_caches[s].data(), lengths[s]});
        attention(batch, kv_type, shape, isa);
        for (std::size_t s = 0; s < lengths.size(); ++s)
          EXPECT_EQ(together[s], alone[s]) << "query " << s << " (" << lengths[s] << " positions), " << threads
                                           << " threads, " << ggml_type_name(kv_type) << ", window " << window << ", "
                                           << isa_name(isa);
      }
      omp_set_num_threads(threads_before);
    }
  }
  }
}

// Decode attention reads each cache row's head where it lies: none of it may read past the
// cache's last row, which here ends just before an inaccessible page (a read past it would crash
// the test). Every ISA level's kernels, every cache type, head sizes with and without columns past
// the last vector (Q8_0: of one and two blocks; 136: a run of 8 AVX-512 vectors and a remainder),
// a last group of fewer than 8 rows; the outputs equal those over the same cache in ordinary memory.
TEST(SingleQueries, ReadNothingPastTheCache) {
  const long page = sysconf(_SC_PAGESIZE);
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
  for (GgmlType kv_type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0})
    for (int64_t head_dim : {12, 32, 64, 136}) {
      if (!cpu_supports(isa)) continue;
      if (kv_type == GgmlType::Q8_0 && head_dim % 32 != 0) continue;  // Q8_0 takes whole blocks a head
      const AttentionShape shape{4, 2, head_dim};
      const int64_t positions = 13, kv_dim = shape.n_kv_heads * head_dim;
      std::vector<float> q(shape.n_heads * head_dim), keys(positions * kv_dim), values(positions * kv_dim);
      for (auto* v : {&q, &keys, &values})
        for (float& x : *v) x = normal(rng);
      const std::vector<std::byte> key_cache = encode_cache(kv_type, keys, positions, kv_dim);
      const std::vector<std::byte> value_cache = encode_cache(kv_type, values, positions, kv_dim);
      const auto bytes = static_cast<long>(key_cache.size()), pages = (bytes + page - 1) / page;
      std::byte* at_the_end[2];
      void* regions[2];
      for (int c = 0; c < 2; ++c) {
        regions[c] = mmap(nullptr, (pages + 1) * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(regions[c], MAP_FAILED);
        ASSERT_EQ(mprotect(static_cast<std::byte*>(regions[c]) + pages * page, page, PROT_NONE), 0);
        at_the_end[c] = static_cast<std::byte*>(regions[c]) + pages * page - bytes;
        std::memcpy(at_the_end[c], (c == 0 ? key_cache : value_cache).data(), key_cache.size());
      }
      std::vector<float> guarded(q.size()), ordinary(q.size());
      attention(guarded.data(), q.data(), at_the_end[0], at_the_end[1], kv_type, positions, shape, isa);
      attention(ordinary.data(), q.data(), key_cache.data(), value_cache.data(), kv_type, positions, shape, isa);
      EXPECT_EQ(guarded, ordinary) << ggml_type_name(kv_type) << ", head_dim " << head_dim << ", " << isa_name(isa);
      for (void* region : regions) munmap(region, (pages + 1) * page);
    }
}

// Each level's two row kernels against the scalar ones, for every cache type, head sizes on and
// off the vector widths (AVX-512 runs of 8, 4 and 1 vectors, and leftover columns), row counts
// around the score kernel's groups of 8, groups of query heads that take every pass (8, 4, 2 and
// 1 heads at a time: 13 = 8 + 4 + 1, 7 = 4 + 2 + 1), rows apart by more than a head (a cache of 3
// heads a position). Both sum the same FP32 products in different orders, so each result may
// differ from the scalar one by the classical bound for two summation orders of m terms: 2 m 2^-24
// times the sum of the terms' magnitudes (a Q8_0 value is its int8 times its scale in both, each
// product rounded once more: m counts it twice).
TEST(AttentionRows, EveryLevelMatchesTheScalarKernels) {
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr double kUnit = 1.0 / (1 << 24);
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (!cpu_supports(isa)) continue;
    for (GgmlType kv_type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0})
      for (int64_t head_dim : {12, 32, 48, 64, 96, 128, 136, 256})
        for (int64_t n : {1, 7, 8, 9, 64})
          for (int64_t heads : {1, 2, 7, 13}) {
            if (kv_type == GgmlType::Q8_0 && head_dim % 32 != 0) continue;
            const int64_t stride = row_bytes(kv_type, 3 * head_dim);
            std::vector<float> q(heads * head_dim), rows(n * 3 * head_dim), coefficients(heads * n);
            for (auto* v : {&q, &rows, &coefficients})
              for (float& x : *v) x = normal(rng);
            std::vector<float> widened = rows;
            const std::vector<std::byte> cache = encode_cache(kv_type, widened, n, 3 * head_dim);
            const AttentionRowKernels &reference = attention_row_kernels(Isa::Scalar, kv_type),
                                      &kernels = attention_row_kernels(isa, kv_type);
            const std::string what = std::string(isa_name(isa)) + ", " + std::string(ggml_type_name(kv_type)) +
                                     ", head_dim " + std::to_string(head_dim) + ", " + std::to_string(n) + " rows, " +
                                     std::to_string(heads) + " heads";
            const double rounding = kv_type == GgmlType::Q8_0 ? 2 : 1;
            std::vector<float> expected(heads * n), scores(heads * n);
            reference.score(expected.data(), n, q.data(), heads, cache.data(), stride, n, head_dim, 0.5f);
            kernels.score(scores.data(), n, q.data(), heads, cache.data(), stride, n, head_dim, 0.5f);
            for (int64_t h = 0; h < heads; ++h)
              for (int64_t j = 0; j < n; ++j) {
                double magnitude = 0;
                for (int64_t c = 0; c < head_dim; ++c)
                  magnitude += std::abs(q[h * head_dim + c] * widened[j * 3 * head_dim + c]) * 0.5;
                EXPECT_NEAR(scores[h * n + j], expected[h * n + j], 2 * rounding * head_dim * kUnit * magnitude)
                    << what << ", head " << h << ", score " << j;
              }
            // Both add to what is there; outputs a head and a half apart.
            const int64_t out_stride = head_dim + head_dim / 2;
            std::vector<float> expected_sum(heads * out_stride, 1.0f), sum(heads * out_stride, 1.0f);
            reference.accumulate(expected_sum.data(), out_stride, coefficients.data(), n, heads, cache.data(), stride, n,
                                 head_dim);
            kernels.accumulate(sum.data(), out_stride, coefficients.data(), n, heads, cache.data(), stride, n, head_dim);
            for (int64_t h = 0; h < heads; ++h)
              for (int64_t c = 0; c < out_stride; ++c) {
                double magnitude = 1;
                for (int64_t k = 0; c < head_dim && k < n; ++k)
                  magnitude += std::abs(coefficients[h * n + k] * widened[k * 3 * head_dim + c]);
                EXPECT_NEAR(sum[h * out_stride + c], expected_sum[h * out_stride + c],
                            2 * rounding * (n + 1) * kUnit * magnitude)
                    << what << ", head " << h << ", column " << c;
              }
          }
  }
}

// A Q8_0 cache holds each head in whole blocks of 32: heads of another size are refused with an
// error, by decode and prefill alike, instead of reading blocks across heads.
TEST(Q8_0Cache, RefusesHeadsOfPartBlocks) {
  const AttentionShape shape{2, 1, 48};
  std::vector<float> q(2 * 48), out(2 * 48);
  std::vector<std::byte> cache(row_bytes(GgmlType::Q8_0, 64) * 4);  // room enough; never read
  EXPECT_THROW(attention(out.data(), q.data(), cache.data(), cache.data(), GgmlType::Q8_0, 2, shape, Isa::Avx2), Error);
  EXPECT_THROW(attention_tiled(out.data(), q.data(), 0, 2, cache.data(), cache.data(), GgmlType::Q8_0, shape, {}, Isa::Scalar),
               Error);
}

TEST(AttentionTiles, ParsesAndRefuses) {
  const AttentionTiles t = parse_attention_tiles("16x64");
  EXPECT_EQ(t.queries, 16);
  EXPECT_EQ(t.keys, 64);
  for (const char* bad : {"8", "0x8", "8x129", "8x8x8", "axb", "8*8", ""}) EXPECT_THROW(parse_attention_tiles(bad), Error) << bad;
  // The flag's default text and the struct's defaults are one tile.
  const AttentionTiles by_default = parse_attention_tiles(kDefaultAttentionTiles);
  EXPECT_EQ(by_default.queries, AttentionTiles{}.queries);
  EXPECT_EQ(by_default.keys, AttentionTiles{}.keys);
}

}  // namespace
}  // namespace cpullm
