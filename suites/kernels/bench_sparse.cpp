// Speed against sparsity: the sparse matvec (decode) and matmul (a 64-token prefill) at LLaMA-7B's
// attention (4096x4096) and feed-forward (11008x4096) shapes, for each pattern at the densities
// it can store, next to the dense kernel of the same value precision, in the same run.
// bytes/s counts the bytes stored (values and indices); FLOP/s counts the dense product's
// 2 * rows * cols (* tokens), so it compares directly with the dense row. Threads: OpenMP's
// default (OMP_NUM_THREADS).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <cmath>
#include <random>
#include <vector>

#include "engine/kernels/matmul.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/kernels/sparse.hpp"
#include "engine/quant/sparsify.hpp"
#include "engine/util/anonymous_memory.hpp"

namespace {

using cpullm::GgmlType;
using cpullm::Isa;

// A random matrix (normal values, so magnitudes vary as trained weights do), pruned and packed
// in `type`, or packed dense when `type` is F32/F16/BF16.
struct Matrix {
  cpullm::AnonymousMemory storage;  // (rows, row bytes), in 2 MiB pages where granted, as the engine maps its models
  cpullm::WeightMatrix w;
};

// The random source values of a shape, drawn once per run: every case of a shape prunes the same matrix.
const std::vector<float>& source_values(int64_t rows, int64_t cols) {
  static std::map<std::pair<int64_t, int64_t>, std::vector<float>> drawn;
  std::vector<float>& dense = drawn[{rows, cols}];
  if (dense.empty()) {
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    dense.resize(rows * cols);
    for (float& v : dense) v = dist(rng);
  }
  return dense;
}

Matrix make_matrix(GgmlType type, int64_t rows, int64_t cols) {
  const std::vector<float>& dense = source_values(rows, cols);
  Matrix m;
  const int64_t stride = cpullm::row_bytes(type, cols);
  m.storage = cpullm::AnonymousMemory(static_cast<std::size_t>(rows * stride), "benchmark weights");
  m.storage.advise_huge_pages();
  if (cpullm::is_sparse(type)) {
    const int64_t group = cpullm::ggml_type_traits(static_cast<uint32_t>(type))->row_group;
#pragma omp parallel for
    for (int64_t r = 0; r < rows; r += group)
      cpullm::encode_sparse_rows(type, dense.data() + r * cols, group, cols, m.storage.data() + r * stride);
  } else {
    for (int64_t r = 0; r < rows; ++r) cpullm::encode_row(type, dense.data() + r * cols, m.storage.data() + r * stride, cols);
  }
  m.w = {m.storage.data(), type, rows, cols};
  return m;
}

// Arguments: values type, rows, cols, pattern (0 dense, else SparsePattern), parameter (per
// mille pruned, or N << 8 | M), ISA, tokens (1: matvec).
void BM_Sparse(benchmark::State& state) {
  const auto values = static_cast<GgmlType>(state.range(0));
  const int64_t rows = state.range(1), cols = state.range(2), pattern = state.range(3), parameter = state.range(4);
  const auto isa = static_cast<Isa>(state.range(5));
  const int64_t tokens = state.range(6);
  if (!cpullm::cpu_supports(isa)) {
    state.SkipWithError("this CPU lacks the ISA");
    return;
  }
  cpullm::SparseType s{static_cast<cpullm::SparsePattern>(pattern), values, parameter, parameter >> 8, parameter & 0xff};
  const GgmlType type = pattern == 0 ? values : cpullm::sparse_type_number(s);
  const Matrix m = make_matrix(type, rows, cols);
  std::vector<float> x(tokens * cols, 0.5f), y(tokens * rows);
  double fastest = INFINITY;
  const cpullm::CacheSizes caches = cpullm::sysconf_cache_sizes();
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    if (tokens == 1) cpullm::matvec(y.data(), m.w, x.data(), isa);
    else cpullm::matmul(y.data(), rows, m.w, x.data(), cols, tokens, isa, caches);
    benchmark::DoNotOptimize(y.data());
    fastest = std::min(fastest, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  // The fastest call: on a host shared with other work the mean measures the neighbours as
  // much as the kernel, the fastest call what the kernel can do when it has the cores.
  state.counters["fastest_us"] = fastest;
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(m.storage.size()));
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * rows * cols * tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = omp_get_max_threads();
  const double sparsity = pattern == 0 ? 0 : pattern == 2 ? 1 - static_cast<double>(s.n) / s.m : parameter / 1000.0;
  state.counters["sparsity"] = sparsity;
  state.SetLabel(std::string(cpullm::ggml_type_name(values)) + " " +
                 (pattern == 0 ? std::string("dense") : cpullm::sparsity_name(s)) + " " +
                 std::string(cpullm::isa_name(isa)) + (tokens == 1 ? " matvec" : " matmul"));
}

// Every pattern at the sparsities of the curve it can store: unstructured and block4x4 at 0,
// 20, 50, 70 and 90%; N:M with M a power of two (LLaMA's rows are multiples of 256, not of 5 or
// 10) at 1:2, 2:4, 4:8 (50%), 1:4, 2:8 (75%), 6:8 (25%), 13:16 (18.75%, the nearest to 20%).
void Cases(benchmark::internal::Benchmark* b) {
  const auto ell = static_cast<int64_t>(cpullm::SparsePattern::ell);
  const auto nm = static_cast<int64_t>(cpullm::SparsePattern::n_of_m);
  const auto block = static_cast<int64_t>(cpullm::SparsePattern::block4x4);
  std::vector<std::pair<int64_t, int64_t>> points = {{0, 0}};
  for (int64_t permille : {0, 200, 500, 700, 900}) points.push_back({ell, permille}), points.push_back({block, permille});
  for (auto [n, m] : {std::pair{1, 2}, {2, 4}, {4, 8}, {1, 4}, {2, 8}, {6, 8}, {13, 16}}) points.push_back({nm, n << 8 | m});
  // F16 values (a 7B model's usual precision); the prefill at one shape and the best ISA only,
  // to keep the run to minutes.
  const auto f16 = static_cast<int64_t>(GgmlType::F16);
  for (auto [rows, cols] : {std::pair{4096, 4096}, {11008, 4096}})
    for (int isa : {static_cast<int>(Isa::Avx2), static_cast<int>(Isa::Avx512)})
      for (auto [pattern, parameter] : points) b->Args({f16, rows, cols, pattern, parameter, isa, 1});
  for (auto [pattern, parameter] : points) b->Args({f16, 4096, 4096, pattern, parameter, static_cast<int>(Isa::Avx512), 64});
}

BENCHMARK(BM_Sparse)->Name("sparse")->Apply(Cases)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
