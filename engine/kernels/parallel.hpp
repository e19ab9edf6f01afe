// How the kernels' parallel loops reach their threads. Outside a team each loop is an OpenMP
// region of its own. Inside run_as_team (Model::forward runs each pass in one) the OpenMP
// threads stay in a single region: the calling thread runs the pass, the others spin, and each
// parallel loop is a job handed to them. An empty OpenMP region can cost several times a job
// (libgomp's barriers make a futex system call, slow in a VM; `bench_kernels
// --benchmark_filter=dispatch` measures both), and a TinyLlama decode step runs 111 parallel
// loops (docs/kernels-decode.md, "Thread teams").
//
//   run_as_team([&] {                                          // the pass, on the calling thread
//     on_every_thread([=](int thread, int threads) { ... });   // a job on every thread
//     for_each_share(n, [=](int64_t begin, int64_t end) { ... });
//   });
//
// (By value: see on_every_thread.)
//
// Outside a team both helpers are `#pragma omp parallel`; inside a job (or any other OpenMP
// region) they run on the calling thread alone, as a nested region does unless nesting is on
// (cpullm never turns it on).
#pragma once
#include <immintrin.h>
#include <omp.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>

namespace cpullm {

// Waits until ready(): pauses first (a handoff takes well under a microsecond), then yields the
// CPU every round, so that where a team has more threads than free cores the thread being
// waited for gets to run (256 pauses, a few µs; after 4096 a tiny model's decode with 3 threads
// on 2 cores ran 3.7x slower than with OpenMP regions, after 256 1.7x faster).
template <typename Ready>
void wait_until(Ready ready) {
  constexpr int kPausesBeforeYielding = 256;
  for (int pauses = 0; !ready();) {
    if (pauses < kPausesBeforeYielding) {
      _mm_pause();
      ++pauses;
    } else {
      std::this_thread::yield();
    }
  }
}

// The OpenMP threads of one region, led by its thread 0. Jobs run one at a time.
class ThreadTeam {
 public:
  // On thread 0: runs job(thread, threads) on every thread of the team, this one as thread 0,
  // and returns when all are done. An exception from any thread's part (thread 0's first) is
  // rethrown here after the others finish theirs, as the engine's errors must reach the caller.
  template <typename Job>
  void run(const Job& job) {
    call_ = [](const void* j, int thread, int threads) { (*static_cast<const Job*>(j))(thread, threads); };
    job_ = &job;
    busy_ = true;
    unfinished_.store(threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);  // publishes the job to the spinning threads
    std::exception_ptr error;
    try {
      job(0, threads_);
    } catch (...) {
      error = std::current_exception();
    }
    wait_until([&] { return unfinished_.load(std::memory_order_acquire) == 0; });
    busy_ = false;
    if (worker_failed_.load(std::memory_order_relaxed)) {  // published by the acquire above
      if (!error) error = worker_error_;
      worker_error_ = nullptr;
      worker_failed_.store(false, std::memory_order_relaxed);
    }
    if (error) std::rethrow_exception(error);
  }
  int threads() const { return threads_; }

  // Thread 0, at the start and the end of the team's region.
  void lead(int threads);
  void close();
  // Every other thread of the region: runs the jobs as they come, until close.
  void serve(int thread);

  // The team this thread leads, when it is not inside one of the team's jobs.
  static ThreadTeam* current();
  // False where OMP_WAIT_POLICY is passive: whoever set it wants no thread spinning while it
  // waits (two programs' spinning threads on the same cores slow both to a crawl), and a team's
  // threads spin between jobs.
  static bool wanted();

 private:
  alignas(64) std::atomic<uint64_t> generation_{0};  // one more per job, and at close
  alignas(64) std::atomic<int> unfinished_{0};       // threads other than 0 still in the job
  std::atomic<bool> worker_failed_{false};           // a thread other than 0 threw in this job
  std::exception_ptr worker_error_;                  // the first such exception
  void (*call_)(const void*, int, int) = nullptr;    // runs *job_
  const void* job_ = nullptr;
  int threads_ = 1;
  bool closing_ = false;
  bool busy_ = false;  // thread 0 is inside a job
};

// Parallel loops handed to threads so far in this process: a team's jobs and on_every_thread's
// OpenMP regions, each a fork/join. decode_step_parallel_loops (model.hpp) counts a step's ahead;
// the tests check it against this.
inline std::atomic<uint64_t> parallel_loops_dispatched{0};

// The threads a parallel loop started here gets.
inline int parallel_threads() {
  if (const ThreadTeam* team = ThreadTeam::current()) return team->threads();
  return omp_in_parallel() ? 1 : omp_get_max_threads();
}

// body(thread, threads) on every thread: the team's, or an OpenMP region's of `region_threads`
// (0: OpenMP's count). One thread, or a call inside a region, runs body(0, 1) directly: even a
// one-thread OpenMP region costs about a microsecond (`bench_kernels --benchmark_filter=dispatch`).
//
// Each thread calls its own copy of body, so what body holds by value is read from that thread's
// stack. What it holds by reference stays in the calling thread's frame, in cache lines that
// thread may keep writing while it computes its part: a loop that reads such state around
// out-of-line calls should take it by value: by reference, in a team, false sharing made
// TinyLlama's output layer 1.5x slower and its prefill 6-10% (docs/kernels-decode.md, "Thread teams").
template <typename Body>
void on_every_thread(Body&& body, int region_threads = 0) {
  const auto each = [&body](int thread, int threads) {
    auto mine = body;
    mine(thread, threads);
  };
  if (ThreadTeam* team = ThreadTeam::current()) {
    parallel_loops_dispatched.fetch_add(1, std::memory_order_relaxed);
    return team->run(each);
  }
  const int threads = region_threads > 0 ? region_threads : omp_get_max_threads();
  if (threads == 1 || omp_in_parallel()) return each(0, 1);
  parallel_loops_dispatched.fetch_add(1, std::memory_order_relaxed);
#pragma omp parallel num_threads(threads)
  each(omp_get_thread_num(), omp_get_num_threads());
}

// body(begin, end) on each thread's contiguous share of [0, n), the shares' sizes differing by at
// most one (OpenMP's schedule(static) without a chunk); each thread calls its own copy of body.
template <typename Body>
void for_each_share(int64_t n, const Body& body) {
  on_every_thread([n, body](int thread, int threads) {
    const int64_t begin = n * thread / threads, end = n * (thread + 1) / threads;
    if (begin < end) body(begin, end);
  });
}

// How a forward pass's parallel loops reach `threads` threads, in words, for the tools' headers.
std::string describe_dispatch(int threads);

// Runs body() on this thread with the other OpenMP threads as its team, or, where it is already
// inside a parallel region, has one thread or teams are not wanted, simply runs it.
template <typename Body>
void run_as_team(Body&& body) {
  if (!ThreadTeam::wanted() || ThreadTeam::current() || omp_in_parallel() || omp_get_max_threads() == 1) return body();
  ThreadTeam team;
  std::exception_ptr error;
#pragma omp parallel
  {
    if (omp_get_thread_num() == 0) {
      team.lead(omp_get_num_threads());
      try {
        body();
      } catch (...) {
        error = std::current_exception();
      }
      team.close();
    } else {
      team.serve(omp_get_thread_num());
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace cpullm
