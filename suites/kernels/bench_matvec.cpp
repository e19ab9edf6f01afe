// Matrix-vector kernels at the decode shapes of TinyLlama-1.1B and LLaMA-7B, per weight type:
// the scalar reference against the OpenMP path, with bytes/s so the memory roof is visible.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "engine/kernels/matvec.hpp"
#include "engine/util/half.hpp"

namespace {

using cpullm::GgmlType;

struct Weights {
  std::vector<std::byte> storage;
  cpullm::WeightMatrix matrix;
};

Weights random_weights(GgmlType type, int64_t rows, int64_t cols) {
  const std::size_t element = type == GgmlType::F32 ? 4 : 2;
  Weights w;
  w.storage.resize(static_cast<std::size_t>(rows * cols) * element);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < rows * cols; ++i) {
    float v = dist(rng);
    uint16_t half = type == GgmlType::F16 ? cpullm::fp32_to_fp16(v) : cpullm::fp32_to_bf16(v);
    std::memcpy(w.storage.data() + i * element, element == 4 ? static_cast<void*>(&v) : &half, element);
  }
  w.matrix = {w.storage.data(), type, rows, cols};
  return w;
}

template <bool kReference>
void BM_Matvec(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const int64_t rows = state.range(1), cols = state.range(2);
  Weights w = random_weights(type, rows, cols);
  std::vector<float> x(cols, 0.5f), y(rows);
  for (auto _ : state) {
    if constexpr (kReference) cpullm::matvec_reference(y.data(), w.matrix, x.data());
    else cpullm::matvec(y.data(), w.matrix, x.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.storage.size()));
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * rows * cols, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(cpullm::ggml_type_name(type)));
}

// (type, rows, cols): attention q/o and ffn gate/up of TinyLlama-1.1B (dim 2048, ffn 5632)
// and of LLaMA-7B (dim 4096, ffn 11008).
void Shapes(benchmark::internal::Benchmark* b) {
  for (auto type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16})
    for (auto [rows, cols] : {std::pair{2048, 2048}, {5632, 2048}, {4096, 4096}, {11008, 4096}})
      b->Args({static_cast<int64_t>(type), rows, cols});
}

BENCHMARK(BM_Matvec<true>)->Name("matvec_reference")->Apply(Shapes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Matvec<false>)->Name("matvec_openmp")->Apply(Shapes)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
