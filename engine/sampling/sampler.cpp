#include "engine/sampling/sampler.hpp"

#include <algorithm>
#include <cmath>

#include "engine/util/error.hpp"

namespace cpullm {

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  if (!(params.temperature >= 0.0f) || !std::isfinite(params.temperature))
    fail("temperature {} must be a finite number >= 0", params.temperature);
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) fail("top-p {} must be in (0, 1]", params.top_p);
}

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (params_.temperature == 0.0f) return argmax(logits);

  const auto vocab = static_cast<int32_t>(logits.size());
  candidates_.resize(vocab);
  for (int32_t i = 0; i < vocab; ++i) candidates_[i] = {logits[i], i};
  const int32_t k = params_.top_k > 0 ? std::min(params_.top_k, vocab) : vocab;
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  std::partial_sort(candidates_.begin(), candidates_.begin() + k, candidates_.end(), by_logit);
  candidates_.resize(k);

  // Softmax at the temperature over the k survivors (sorted, so the first is the maximum).
  const float max_logit = candidates_.front().first;
  double total = 0.0;
  for (auto& c : candidates_) {
    c.first = std::exp((c.first - max_logit) / params_.temperature);
    total += c.first;
  }
  // Nucleus: the shortest prefix whose probability reaches top_p.
  double kept = 0.0;
  std::size_t n = 0;
  while (n < candidates_.size()) {
    kept += candidates_[n++].first / total;
    if (kept >= params_.top_p) break;
  }
  double mass = 0.0;
  for (std::size_t i = 0; i < n; ++i) mass += candidates_[i].first;

  // A uniform draw in [0, mass) from the top 53 bits of the generator.
  const double draw = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * mass;
  double cumulative = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    cumulative += candidates_[i].first;
    if (draw < cumulative) return candidates_[i].second;
  }
  return candidates_[n - 1].second;
}

}  // namespace cpullm
