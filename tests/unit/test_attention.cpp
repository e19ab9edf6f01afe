// Tiled attention with an online softmax against plain attention, query by query, at the
// issue's sequence lengths and at tile sizes from 1x1 to 128x128 (including sizes that do not
// divide the sequence). Both sum in FP32 in different orders and the tiled one rescales its sums
// as the maximum moves: outputs (weighted means of values in [-1, 1]) agree within 2e-5.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "engine/kernels/attention.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

struct Case {
  int64_t sequence;       // cached positions after the queries ran
  int64_t queries;        // how many of the last positions are queries
  AttentionTiles tiles;
};

class TiledAttention : public ::testing::TestWithParam<Case> {};

TEST_P(TiledAttention, MatchesPlainAttention) {
  const Case c = GetParam();
  const AttentionShape shape{8, 2, 64};  // grouped-query: 4 query heads per KV head
  const int64_t dim = shape.n_heads * shape.head_dim, kv_dim = shape.n_kv_heads * shape.head_dim;
  const int64_t first = c.sequence - c.queries;
  std::mt19937 rng(static_cast<unsigned>(c.sequence + c.tiles.queries * 131 + c.tiles.keys));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> q(c.queries * dim), keys(c.sequence * kv_dim), values(c.sequence * kv_dim);
  for (float& v : q) v = normal(rng);
  for (float& v : keys) v = normal(rng);
  for (float& v : values) v = uniform(rng);

  std::vector<float> tiled(c.queries * dim);
  attention_tiled(tiled.data(), q.data(), first, c.queries, keys.data(), values.data(), shape, c.tiles);
  std::vector<float> plain(dim), scores(shape.n_heads * c.sequence);
  for (int64_t i = 0; i < c.queries; ++i) {
    attention(plain.data(), q.data() + i * dim, keys.data(), values.data(), first + i + 1, shape, scores.data());
    for (int64_t d = 0; d < dim; ++d)
      ASSERT_NEAR(tiled[i * dim + d], plain[d], 2e-5) << "query " << first + i << " element " << d;
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (AttentionTiles tiles : {AttentionTiles{1, 1}, AttentionTiles{8, 8}, AttentionTiles{16, 64},
                               AttentionTiles{128, 128}, AttentionTiles{7, 13}}) {
    out.push_back({512, 512, tiles});   // a 512-token prompt from position 0
    out.push_back({2048, 96, tiles});   // the last chunk of a 2048-token context
  }
  return out;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return "seq" + std::to_string(c.sequence) + "_q" + std::to_string(c.queries) + "_tile" +
         std::to_string(c.tiles.queries) + "x" + std::to_string(c.tiles.keys);
}

INSTANTIATE_TEST_SUITE_P(Cases, TiledAttention, ::testing::ValuesIn(cases()), case_name);

TEST(AttentionTiles, ParsesAndRefuses) {
  const AttentionTiles t = parse_attention_tiles("16x64");
  EXPECT_EQ(t.queries, 16);
  EXPECT_EQ(t.keys, 64);
  for (const char* bad : {"8", "0x8", "8x129", "8x8x8", "axb", "8*8", ""}) EXPECT_THROW(parse_attention_tiles(bad), Error) << bad;
}

}  // namespace
}  // namespace cpullm
