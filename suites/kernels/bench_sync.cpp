// What it costs threads to meet: every parallel region of a decode step (one per matrix group,
// attention, ...) pays a fork/join, and a step run inside one region would pay a barrier per op
// instead. Measured here: an OpenMP fork/join, a barrier inside one region, and a cache line's
// round trip between two threads (one writes a number, the other answers with the next), each
// per 1000 in a row, at the thread counts the roofs run at (OMP_PROC_BIND and OMP_PLACES apply).
// They are microseconds each at 2 threads, and a step pays one per region; on a 4-socket
// server they grow with the distance between the threads.
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>

#include <atomic>
#include <cstdint>

#include "suites/kernels/thread_counts.hpp"

namespace {

constexpr int kMeetings = 1000;  // per timed iteration

// Seconds per meeting, as a counter beside the iteration's time ("2.9u": 2.9 µs).
void count_meetings(benchmark::State& state) {
  state.counters["seconds_per_meeting"] = benchmark::Counter(static_cast<double>(state.iterations()) * kMeetings,
                                                             benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_ForkJoin(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state)
    for (int i = 0; i < kMeetings; ++i) {
#pragma omp parallel num_threads(threads)
      benchmark::DoNotOptimize(omp_get_thread_num());
    }
  count_meetings(state);
}

void BM_Barrier(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) {
#pragma omp parallel num_threads(threads)
    for (int i = 0; i < kMeetings; ++i) {
#pragma omp barrier
    }
  }
  count_meetings(state);
}

// Threads 0 and 1 of a region take turns: 0 writes an odd number, 1 answers with the next even
// one. Where OpenMP gives the region one thread, nothing waits and the case says so.
void BM_RoundTrip(benchmark::State& state) {
  std::atomic<int64_t> turn{0};
  bool paired = true;
  for (auto _ : state) {
    turn.store(0, std::memory_order_relaxed);
#pragma omp parallel num_threads(2)
    {
      if (omp_get_num_threads() < 2) paired = false;
      const int me = omp_get_thread_num();
      for (int64_t i = 0; paired && me < 2 && i < kMeetings; ++i) {
        const int64_t wait_for = me == 0 ? 2 * i + 2 : 2 * i + 1, write = me == 0 ? 2 * i + 1 : 2 * i + 2;
        if (me == 0) turn.store(write, std::memory_order_release);
        while (turn.load(std::memory_order_acquire) != wait_for) _mm_pause();  // lets a thread sharing the core run
        if (me == 1) turn.store(write, std::memory_order_release);
      }
    }
    if (!paired) break;
  }
  if (!paired) return state.SkipWithError("OpenMP gave the region one thread: no pair to time");
  count_meetings(state);
}

void Threads(benchmark::internal::Benchmark* b) { cpullm::bench::apply_thread_counts(b); }

BENCHMARK(BM_ForkJoin)->Name("sync_fork_join")->Apply(Threads)->UseRealTime();
BENCHMARK(BM_Barrier)->Name("sync_barrier")->Apply(Threads)->UseRealTime();

BENCHMARK(BM_RoundTrip)->Name("sync_round_trip")->UseRealTime();

}  // namespace
