// What one parallel op costs to start and finish, whatever it computes: the thread-pool choice
// (docs/topology.md, "The thread pool: OpenMP threads, one team per forward pass"). Decode runs
// 111 parallel ops per token on TinyLlama's shape and 5 per layer on any model, each a few
// microseconds to a millisecond of work, so the dispatch cost per op is what a pool can save.
//   omp_fork_join: an empty `#pragma omp parallel` region, as a loop outside a forward pass opens.
//   team_job: an empty job handed to a ThreadTeam (engine/kernels/parallel.hpp), as every loop
//     inside Model::forward's pass is: the team's threads spin on a generation counter between
//     jobs and the caller waits until each has finished its share.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <vector>

#include "engine/kernels/parallel.hpp"
#include "suites/kernels/thread_counts.hpp"

namespace {

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

void BM_TeamJob(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0)), before = omp_get_max_threads();
  std::vector<int> touched(threads * 16);
  omp_set_num_threads(threads);  // a team is OpenMP's thread count
  cpullm::run_as_team([&] {
    for (auto _ : state) {
      cpullm::on_every_thread([&](int i, int) { touched[i * 16] += 1; });
      benchmark::DoNotOptimize(touched.data());
    }
  });
  omp_set_num_threads(before);
  state.SetLabel("ThreadTeam");
}

void Threads(benchmark::internal::Benchmark* b) { cpullm::bench::apply_thread_counts(b); }

BENCHMARK(BM_OmpForkJoin)->Name("dispatch/omp_fork_join")->Apply(Threads)->UseRealTime();
BENCHMARK(BM_TeamJob)->Name("dispatch/team_job")->Apply(Threads)->UseRealTime();

}  // namespace
