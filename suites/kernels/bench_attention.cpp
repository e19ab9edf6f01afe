// Prefill attention per tile size: 512 queries (a prompt chunk) at the end of a 512- and a
// 2048-position context, LLaMA-7B's head layout (32 heads of 64), against the plain kernel run
// query by query. FLOP/s counts 4 * head_dim per (query, visible key, head): q.k and p.v.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "engine/kernels/attention.hpp"

namespace {

using cpullm::AttentionShape;
using cpullm::AttentionTiles;

constexpr AttentionShape kShape{32, 32, 128};  // LLaMA-7B: 32 heads of 128
constexpr int64_t kQueries = 512;

struct Inputs {
  std::vector<float> q, keys, values, out;
};

Inputs random_inputs(int64_t sequence) {
  const int64_t dim = kShape.n_heads * kShape.head_dim;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Inputs in{std::vector<float>(kQueries * dim), std::vector<float>(sequence * dim), std::vector<float>(sequence * dim),
            std::vector<float>(kQueries * dim)};
  for (auto* v : {&in.q, &in.keys, &in.values})
    for (float& x : *v) x = dist(rng);
  return in;
}

double attention_flops(int64_t sequence) {
  const int64_t first = sequence - kQueries;
  double pairs = 0;  // (query, visible key) pairs
  for (int64_t i = 0; i < kQueries; ++i) pairs += static_cast<double>(first + i + 1);
  return pairs * kShape.n_heads * 4.0 * kShape.head_dim;
}

// Arguments: context length, query tile, key tile (0 x 0: the plain kernel, query by query).
void BM_Attention(benchmark::State& state) {
  const int64_t sequence = state.range(0);
  const AttentionTiles tiles{state.range(1), state.range(2)};
  Inputs in = random_inputs(sequence);
  const int64_t dim = kShape.n_heads * kShape.head_dim, first = sequence - kQueries;
  std::vector<float> scores(kShape.n_heads * sequence);
  for (auto _ : state) {
    if (tiles.queries == 0) {
      for (int64_t i = 0; i < kQueries; ++i)
        cpullm::attention(in.out.data() + i * dim, in.q.data() + i * dim, in.keys.data(), in.values.data(),
                          first + i + 1, kShape, scores.data());
    } else {
      cpullm::attention_tiled(in.out.data(), in.q.data(), first, kQueries, in.keys.data(), in.values.data(), kShape,
                              tiles);
    }
    benchmark::DoNotOptimize(in.out.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(attention_flops(sequence), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(tiles.queries == 0 ? "plain" : std::to_string(tiles.queries) + "x" + std::to_string(tiles.keys));
}

void Cases(benchmark::internal::Benchmark* b) {
  for (int64_t sequence : {512, 2048})
    for (auto [q, k] : {std::pair{0, 0}, {1, 64}, {8, 8}, {16, 16}, {32, 32}, {16, 64}, {64, 64}, {128, 128}})
      b->Args({sequence, q, k});
}

BENCHMARK(BM_Attention)->Name("attention")->Apply(Cases)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
