// This machine's memory roof, measured in the same run as the kernels it bounds: a read
// (sum of a large array) and a STREAM triad (a = b + s * c), each over buffers far larger than
// the last-level cache, with 1..N OpenMP threads. Kernel figures mean something only next to
// these: this host's bandwidth moves from run to run.
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>

#include <cstdint>
#include <vector>

#include "suites/kernels/thread_counts.hpp"

namespace {

constexpr int64_t kBytes = int64_t{1} << 30;  // per array: 1 GiB, far beyond any L3

std::vector<float>& array(int index) {
  static std::vector<float> arrays[3] = {std::vector<float>(kBytes / 4, 1.0f), std::vector<float>(kBytes / 4, 2.0f),
                                         std::vector<float>(kBytes / 4, 0.0f)};
  return arrays[index];
}

void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const std::vector<float>& a = array(0);
  const int64_t n = static_cast<int64_t>(a.size());
  for (auto _ : state) {
    // Four independent vector sums per thread: one chain would be bound by add latency,
    // not by memory.
    __m256 total = _mm256_setzero_ps();
#pragma omp parallel num_threads(threads)
    {
      __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
#pragma omp for schedule(static)
      for (int64_t i = 0; i < n; i += 32)
        for (int k = 0; k < 4; ++k) acc[k] = _mm256_add_ps(acc[k], _mm256_loadu_ps(a.data() + i + 8 * k));
#pragma omp critical
      total = _mm256_add_ps(total, _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    }
    benchmark::DoNotOptimize(total);
  }
  state.SetBytesProcessed(state.iterations() * kBytes);
}

void BM_Triad(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const float* b = array(0).data();
  const float* c = array(1).data();
  float* a = array(2).data();
  const int64_t n = kBytes / 4;
  for (auto _ : state) {
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * kBytes);  // two reads and a write per element
}

void Threads(benchmark::internal::Benchmark* b) { cpullm::bench::apply_thread_counts(b); }

BENCHMARK(BM_ReadBandwidth)->Name("memory_read")->Apply(Threads)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Triad)->Name("memory_triad")->Apply(Threads)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
