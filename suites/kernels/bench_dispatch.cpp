// What one parallel op costs to start and finish, whatever it computes: the thread-pool choice
// (docs/topology.md, "Why OpenMP"). Decode runs about 90 parallel ops per token on TinyLlama's
// shape and 4 per layer on any model, each a few microseconds to a millisecond of work, so the
// dispatch cost per op is what a pool can save.
//   omp_fork_join: an empty `#pragma omp parallel` region, as every matvec opens one.
//   spin_pool: the cheapest pool there is, for comparison: workers spin on a generation counter
//     (burning their cores between ops) and the caller spins until each has finished its share.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <atomic>
#include <thread>
#include <vector>

#include "suites/kernels/thread_counts.hpp"

namespace {

class SpinPool {
 public:
  explicit SpinPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
  }
  ~SpinPool() {
    stop_.store(true);
    generation_.fetch_add(1);
    for (std::thread& t : workers_) t.join();
  }
  // Runs op(i) on thread i for every thread, the caller being thread 0; returns when all are done.
  template <typename Op>
  void run(Op& op) {
    op_ = [](void* f, int i) { (*static_cast<Op*>(f))(i); };
    arg_ = &op;
    finished_.store(0);
    generation_.fetch_add(1, std::memory_order_release);
    op(0);
    while (finished_.load(std::memory_order_acquire) != static_cast<int>(workers_.size())) {
    }
  }

 private:
  void work(int index) {
    unsigned seen = 0;
    while (true) {
      unsigned now;
      while ((now = generation_.load(std::memory_order_acquire)) == seen) {
      }
      seen = now;
      if (stop_.load()) return;
      op_(arg_, index);
      finished_.fetch_add(1, std::memory_order_release);
    }
  }
  std::vector<std::thread> workers_;
  std::atomic<unsigned> generation_{0};  // bumped once per op
  std::atomic<int> finished_{0};         // workers done with the current op
  std::atomic<bool> stop_{false};
  void (*op_)(void*, int) = nullptr;     // the current op, type-erased
  void* arg_ = nullptr;
};

// Argument: threads.
void BM_OmpForkJoin(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  std::vector<int> touched(threads * 16);
  for (auto _ : state) {
#pragma omp parallel num_threads(threads)
    touched[omp_get_thread_num() * 16] += 1;
    benchmark::DoNotOptimize(touched.data());
  }
  state.SetLabel("openmp (libgomp)");
}

void BM_SpinPool(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  std::vector<int> touched(threads * 16);
  SpinPool pool(threads);
  auto op = [&](int i) { touched[i * 16] += 1; };
  for (auto _ : state) {
    pool.run(op);
    benchmark::DoNotOptimize(touched.data());
  }
  state.SetLabel("spinning pool");
}

void Threads(benchmark::internal::Benchmark* b) { cpullm::bench::apply_thread_counts(b); }

BENCHMARK(BM_OmpForkJoin)->Name("dispatch/omp_fork_join")->Apply(Threads)->UseRealTime();
BENCHMARK(BM_SpinPool)->Name("dispatch/spin_pool")->Apply(Threads)->UseRealTime();

}  // namespace
