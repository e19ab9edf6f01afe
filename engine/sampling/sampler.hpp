// Picks the next token from logits: greedy at temperature 0, otherwise temperature, top-k and
// top-p (nucleus) filtering and a draw from a seeded generator, so runs are repeatable.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace cpullm {

struct SamplingParams {
  float temperature = 0.8f;  // 0: greedy
  int32_t top_k = 40;        // keep the k most likely tokens; <= 0 keeps all
  float top_p = 0.95f;       // keep the smallest set whose probability reaches p; 1 keeps all
  uint64_t seed = 42;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  int32_t sample(std::span<const float> logits);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // (vocab) scratch: (probability, id)
};

// The index of the largest logit; the lowest index among equals.
int32_t argmax(std::span<const float> logits);

}  // namespace cpullm
