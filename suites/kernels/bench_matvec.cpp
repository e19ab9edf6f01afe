// Matrix-vector kernels at the decode shapes of TinyLlama-1.1B and LLaMA-7B, for every weight
// type and every ISA level this CPU runs, with the single-threaded scalar reference beside them.
// bytes/s counts the weight bytes read: the figure to hold against bench_memory's read roof.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "engine/kernels/matvec.hpp"
#include "suites/kernels/random_weights.hpp"

namespace {

using cpullm::GgmlType;
using cpullm::Isa;

using cpullm::bench::random_weights;
using cpullm::bench::Weights;

// Arguments: weight type, rows, cols, ISA (-1: the single-threaded scalar reference).
void BM_Matvec(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const int64_t rows = state.range(1), cols = state.range(2);
  const bool reference = state.range(3) < 0;
  const Isa isa = reference ? Isa::Scalar : static_cast<Isa>(state.range(3));
  if (!cpullm::cpu_supports(isa)) {
    state.SkipWithError("this CPU lacks the ISA");
    return;
  }
  Weights w = random_weights(type, rows, cols);
  std::vector<float> x(cols, 0.5f), y(rows);
  for (auto _ : state) {
    if (reference) cpullm::matvec_reference(y.data(), w.matrix, x.data());
    else cpullm::matvec(y.data(), w.matrix, x.data(), isa);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.storage.size()));
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * rows * cols, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(cpullm::ggml_type_name(type)) + " " +
                 (reference ? "reference" : std::string(cpullm::isa_name(isa))));
}

// Attention q/o and ffn gate/up of TinyLlama-1.1B (dim 2048, ffn 5632) and LLaMA-7B
// (dim 4096, ffn 11008). And 256 x 2048, which in the integer formats (at most 0.6 MiB) stays
// in L2 between iterations: the kernel's own speed, memory aside. Decode at 2 threads is
// memory-bound only where that is well above the read roof's share of one core.
void Cases(benchmark::internal::Benchmark* b) {
  for (auto type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                    GgmlType::CPULLM_INT8_CHANNEL})
    for (auto [rows, cols] : {std::pair{256, 2048}, {2048, 2048}, {5632, 2048}, {4096, 4096}, {11008, 4096}})
      for (int isa : {-1, static_cast<int>(Isa::Scalar), static_cast<int>(Isa::Avx2), static_cast<int>(Isa::Avx512)})
        b->Args({static_cast<int64_t>(type), rows, cols, isa});
}

BENCHMARK(BM_Matvec)->Name("matvec")->Apply(Cases)->UseRealTime()->Unit(benchmark::kMicrosecond);

// One decode layer's projections that share an input, as separate matvecs (one fork/join and
// one activation quantization each) or as matvec_group (one for the lot): TinyLlama-1.1B's
// q, k, v (2048, 256, 256 rows of 2048) then gate, up (5632, 5632 rows of 2048).
// Arguments: weight type, ISA, 1 for matvec_group.
void BM_MatvecGroup(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const auto isa = static_cast<Isa>(state.range(1));
  const bool grouped = state.range(2) != 0;
  if (!cpullm::cpu_supports(isa)) {
    state.SkipWithError("this CPU lacks the ISA");
    return;
  }
  const std::vector<std::vector<int64_t>> groups = {{2048, 256, 256}, {5632, 5632}};  // rows of each group's matrices
  std::vector<Weights> weights;
  std::vector<std::vector<float>> outputs;
  int64_t bytes = 0;
  for (const auto& group : groups)
    for (int64_t rows : group) {
      weights.push_back(random_weights(type, rows, 2048));
      outputs.emplace_back(rows);
      bytes += static_cast<int64_t>(weights.back().storage.size());
    }
  std::vector<float> x(2048, 0.5f);
  for (auto _ : state) {
    std::size_t i = 0;
    for (const auto& group : groups) {
      std::vector<cpullm::MatvecTask> tasks;
      for (std::size_t k = 0; k < group.size(); ++k, ++i) tasks.push_back({outputs[i].data(), &weights[i].matrix});
      if (grouped) cpullm::matvec_group(tasks, x.data(), isa);
      else
        for (const auto& task : tasks) cpullm::matvec(task.y, *task.w, x.data(), isa);
    }
    benchmark::DoNotOptimize(outputs.data());
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  state.SetLabel(std::string(cpullm::ggml_type_name(type)) + " " + std::string(cpullm::isa_name(isa)) +
                 (grouped ? " matvec_group" : " separate"));
}

void GroupCases(benchmark::internal::Benchmark* b) {
  for (auto type : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0})
    for (Isa isa : {Isa::Avx2, Isa::Avx512})
      for (int grouped : {0, 1}) b->Args({static_cast<int64_t>(type), static_cast<int64_t>(isa), grouped});
}

BENCHMARK(BM_MatvecGroup)->Name("matvec_group")->Apply(GroupCases)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
