// The thread counts the roof benchmarks run at: 1, 2, 4, ... up to OpenMP's maximum, and the
// maximum itself, so every kernel's thread count has a roof measured beside it.
#pragma once
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>

namespace cpullm::bench {

// One case per thread count, the count as the last argument after `args`.
template <typename... Args>
void apply_thread_counts(benchmark::internal::Benchmark* b, Args... args) {
  const int max = omp_get_max_threads();
  for (int t = 1; t <= max; t *= 2) b->Args({static_cast<int64_t>(args)..., t});
  if ((max & (max - 1)) != 0) b->Args({static_cast<int64_t>(args)..., max});
}

}  // namespace cpullm::bench
