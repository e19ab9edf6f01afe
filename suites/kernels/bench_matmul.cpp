// The prefill GEMM at TinyLlama-1.1B's (2048x2048, 5632x2048) and LLaMA-7B's (4096x4096,
// 11008x4096) attention and feed-forward shapes, for a 32- and a 512-token prompt, every weight
// type and ISA level, next to the same product done as one matvec per token (what prefill did
// before the GEMM), and the packing alone.
// FLOP/s counts 2 * rows * cols * tokens.
#include <benchmark/benchmark.h>

#include <omp.h>

#include <vector>

#include "engine/kernels/gemm.hpp"
#include "engine/kernels/matmul.hpp"
#include "suites/kernels/random_weights.hpp"

namespace {

using cpullm::GgmlType;
using cpullm::Isa;

using cpullm::bench::random_weights;
using cpullm::bench::Weights;

// Arguments: weight type, rows, cols, tokens, ISA, and 1 for the loop of matvec calls.
void BM_Matmul(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const int64_t rows = state.range(1), cols = state.range(2), tokens = state.range(3);
  const auto isa = static_cast<Isa>(state.range(4));
  const bool matvec_loop = state.range(5) != 0;
  if (!cpullm::cpu_supports(isa)) {
    state.SkipWithError("this CPU lacks the ISA");
    return;
  }
  Weights w = random_weights(type, rows, cols);
  std::vector<float> x(tokens * cols), y(tokens * rows);  // (tokens, cols), (tokens, rows)
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  const cpullm::CacheSizes caches = cpullm::sysconf_cache_sizes();
  for (auto _ : state) {
    if (matvec_loop)
      for (int64_t t = 0; t < tokens; ++t) cpullm::matvec(y.data() + t * rows, w.matrix, x.data() + t * cols, isa);
    else
      cpullm::matmul(y.data(), rows, w.matrix, x.data(), cols, tokens, isa, caches);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * rows * cols * tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(cpullm::ggml_type_name(type)) + " " + std::string(cpullm::isa_name(isa)) +
                 (matvec_loop ? " matvec-loop" : " gemm"));
}

void Cases(benchmark::internal::Benchmark* b) {
  for (auto type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                    GgmlType::CPULLM_INT8_CHANNEL, GgmlType::CPULLM_Q4_0_R8, GgmlType::CPULLM_Q8_0_R8})
    for (auto [rows, cols] : {std::pair{2048, 2048}, {5632, 2048}, {4096, 4096}, {11008, 4096}})
      for (int tokens : {32, 512})
        for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
          for (int loop : {0, 1})
            if (isa != Isa::Scalar || tokens == 32)  // the scalar level at 512 tokens takes minutes
              b->Args({static_cast<int64_t>(type), rows, cols, tokens, static_cast<int64_t>(isa), loop});
}

BENCHMARK(BM_Matmul)->Name("matmul")->Apply(Cases)->UseRealTime()->Unit(benchmark::kMillisecond);

// Packing alone: every panel of the matrix packed once, as matmul does per call (weights are
// never stored repacked). A file holding the weights already in panel layout would save this
// time on each call, and no more: the micro-kernels would be the same. Arguments: weight type,
// rows, cols, ISA.
void BM_GemmPacking(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const int64_t rows = state.range(1), cols = state.range(2);
  const auto isa = static_cast<Isa>(state.range(3));
  if (!cpullm::cpu_supports(isa)) {
    state.SkipWithError("this CPU lacks the ISA");
    return;
  }
  Weights w = random_weights(type, rows, cols);
  const cpullm::GemmKernels& kernels = cpullm::gemm_kernels(isa);
  const bool integer = cpullm::uses_q8_0_activations(type);
  const cpullm::IntegerTileKernel& tile = cpullm::integer_tile_kernel(kernels, type);
  const int R = integer ? tile.rows : kernels.float_rows;
  const int64_t panel_bytes =
      integer ? cpullm::integer_panel_block_bytes(R) * (cols / cpullm::kQuantBlock) : R * cols * int64_t{sizeof(float)};
  std::vector<std::vector<std::byte>> panels(omp_get_max_threads(), std::vector<std::byte>(panel_bytes));
  for (auto _ : state) {
#pragma omp parallel
    {
      std::vector<std::byte>& panel = panels[omp_get_thread_num()];
#pragma omp for schedule(static)
      for (int64_t r0 = 0; r0 < rows; r0 += R) {
        if (integer)
          cpullm::pack_integer_panel(w.matrix, r0, 0, cols / cpullm::kQuantBlock, R, tile.weights, panel.data());
        else
          cpullm::pack_float_panel(w.matrix, r0, 0, cols, R, reinterpret_cast<float*>(panel.data()));
        benchmark::DoNotOptimize(panel.data());
      }
    }
  }
  state.counters["bytes/s"] = benchmark::Counter(static_cast<double>(w.matrix.rows * cpullm::row_bytes(w.matrix)),
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(cpullm::ggml_type_name(type)) + " " + std::string(cpullm::isa_name(isa)) + " pack");
}

void PackingCases(benchmark::internal::Benchmark* b) {
  for (auto type : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::CPULLM_Q4_0_R8,
                    GgmlType::CPULLM_Q8_0_R8})
    for (Isa isa : {Isa::Avx2, Isa::Avx512})
      b->Args({static_cast<int64_t>(type), 4096, 4096, static_cast<int64_t>(isa)});
}

BENCHMARK(BM_GemmPacking)->Name("gemm_packing")->Apply(PackingCases)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
