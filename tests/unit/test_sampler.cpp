// Sampling: greedy, the filters, reproducibility from a seed, and the drawn distribution.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/sampling/sampler.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

TEST(Sampler, GreedyPicksTheLargestLowestIndexOnTies) {
  Sampler greedy({.temperature = 0.0f});
  std::vector<float> logits = {0.1f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(greedy.sample(logits), 1);
  EXPECT_EQ(argmax(logits), 1);
}

TEST(Sampler, TopKOfOneIsGreedyAtAnyTemperature) {
  Sampler sampler({.temperature = 5.0f, .top_k = 1, .top_p = 1.0f, .seed = 3});
  std::vector<float> logits = {0.0f, 0.2f, 0.1f};
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sampler.sample(logits), 1);
}

TEST(Sampler, SmallTopPKeepsOnlyTheMostLikely) {
  Sampler sampler({.temperature = 1.0f, .top_k = 0, .top_p = 0.1f, .seed = 3});
  std::vector<float> logits = {std::log(0.2f), std::log(0.5f), std::log(0.3f)};
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sampler.sample(logits), 1);
}

TEST(Sampler, TopKExcludesTheRest) {
  Sampler sampler({.temperature = 1.0f, .top_k = 2, .top_p = 1.0f, .seed = 4});
  std::vector<float> logits = {std::log(0.4f), std::log(0.35f), std::log(0.25f)};
  for (int i = 0; i < 2000; ++i) EXPECT_NE(sampler.sample(logits), 2);
}

TEST(Sampler, DrawsFollowTheSoftmax) {
  Sampler sampler({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 11});
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  std::vector<int> counts(3);
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) ++counts[sampler.sample(logits)];
  // Binomial standard deviation at p=0.5 over 20000 draws is 0.0035: 0.015 is over 4 sigma.
  EXPECT_NEAR(counts[0] / double(draws), 0.5, 0.015);
  EXPECT_NEAR(counts[1] / double(draws), 0.3, 0.015);
  EXPECT_NEAR(counts[2] / double(draws), 0.2, 0.015);
}

TEST(Sampler, TemperatureSharpens) {
  Sampler cold({.temperature = 0.25f, .top_k = 0, .top_p = 1.0f, .seed = 2});
  std::vector<float> logits = {std::log(0.6f), std::log(0.4f)};
  int first = 0;
  for (int i = 0; i < 4000; ++i) first += cold.sample(logits) == 0;
  // At T = 1/4 the odds 0.6:0.4 become 0.6^4:0.4^4, p(first) = 0.835.
  EXPECT_NEAR(first / 4000.0, 0.835, 0.03);
}

TEST(Sampler, SameSeedSameTokensOtherSeedOtherTokens) {
  std::vector<float> logits(100);
  for (int i = 0; i < 100; ++i) logits[i] = std::sin(i * 0.7f);
  auto run = [&](uint64_t seed) {
    Sampler sampler({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = seed});
    std::vector<int32_t> tokens;
    for (int i = 0; i < 50; ++i) tokens.push_back(sampler.sample(logits));
    return tokens;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(Sampler, RefusesBadParameters) {
  EXPECT_THROW(Sampler({.temperature = -1.0f}), Error);
  EXPECT_THROW(Sampler({.temperature = 1.0f, .top_k = 0, .top_p = 0.0f}), Error);
  EXPECT_THROW(Sampler({.temperature = NAN}), Error);
}

}  // namespace
}  // namespace cpullm
