// The kernels' parallel loops (engine/kernels/parallel.hpp): inside a team and outside one,
// every thread runs each loop once and every index falls in exactly one share; loops nested in
// a job run on their thread alone; exceptions reach the caller and leave no team behind.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "engine/kernels/parallel.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// Sets the OpenMP thread count for one test, restoring it after.
class Threads {
 public:
  explicit Threads(int n) : before_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(before_); }

 private:
  int before_;
};

// What one on_every_thread call saw: how often each thread ran, the count it was told, on which OS threads.
struct Visits {
  std::vector<std::atomic<int>> runs = std::vector<std::atomic<int>>(8);
  std::atomic<int> wrong_count{0};
  std::mutex mutex;
  std::set<std::thread::id> os_threads;
  void record(int thread, int threads, int expected_threads) {
    runs[thread].fetch_add(1);
    if (threads != expected_threads) wrong_count.fetch_add(1);
    std::lock_guard lock(mutex);
    os_threads.insert(std::this_thread::get_id());
  }
};

// Thread counts above this machine's cores too: waiting threads yield, so a team still finishes.
TEST(ThreadTeam, EveryThreadRunsEachJobOnceOnItsOwnOsThread) {
  for (int n : {1, 2, 3, 5}) {
    Threads threads(n);
    std::vector<Visits> jobs(50);
    int team_size = 0;
    run_as_team([&] {
      team_size = parallel_threads();
      for (Visits& job : jobs) on_every_thread([&](int thread, int count) { job.record(thread, count, team_size); });
    });
    EXPECT_EQ(team_size, n);
    for (const Visits& job : jobs) {
      for (int t = 0; t < 8; ++t) EXPECT_EQ(job.runs[t].load(), t < n ? 1 : 0) << n << " threads, thread " << t;
      EXPECT_EQ(job.wrong_count.load(), 0);
      EXPECT_EQ(static_cast<int>(job.os_threads.size()), n);
    }
  }
}

TEST(ThreadTeam, SharesCoverEveryIndexOnceInsideAndOutsideATeam) {
  Threads threads(3);
  for (int64_t n : {0, 1, 2, 3, 7, 1000}) {
    for (bool in_team : {false, true}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      const auto loop = [&] {
        for_each_share(n, [&](int64_t begin, int64_t end) {
          EXPECT_LT(begin, end);
          for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
        });
      };
      if (in_team) run_as_team(loop);
      else loop();
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n " << n << ", index " << i << ", team " << in_team;
    }
  }
}

// A loop started inside a job (a kernel called on a thread's own rows) must not hand work to
// the team that is running the job: it runs where it was called, as a nested OpenMP region would.
TEST(ThreadTeam, LoopsInsideAJobRunOnTheirThreadAlone) {
  Threads threads(2);
  std::atomic<int> nested_runs{0}, wrong{0};
  run_as_team([&] {
    on_every_thread([&](int, int) {
      if (parallel_threads() != 1) wrong.fetch_add(1);
      on_every_thread([&](int thread, int count) {
        nested_runs.fetch_add(1);
        if (thread != 0 || count != 1) wrong.fetch_add(1);
      });
    });
    // After the job the team takes loops again.
    on_every_thread([&](int, int count) {
      if (count != 2) wrong.fetch_add(1);
    });
  });
  EXPECT_EQ(nested_runs.load(), 2);
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ThreadTeam, InsideAParallelRegionTheBodyRunsDirectly) {
  Threads threads(2);
  std::atomic<int> bodies{0}, wrong{0};
#pragma omp parallel
  run_as_team([&] {
    bodies.fetch_add(1);
    if (parallel_threads() != 1) wrong.fetch_add(1);
    on_every_thread([&](int thread, int count) {
      if (thread != 0 || count != 1) wrong.fetch_add(1);
    });
  });
  EXPECT_EQ(bodies.load(), 2);
  EXPECT_EQ(wrong.load(), 0);
}

// OMP_WAIT_POLICY=passive asks for no spinning: no team, each loop its own OpenMP region.
TEST(ThreadTeam, PassiveWaitPolicyMeansNoTeam) {
  Threads threads(2);
  const char* before = std::getenv("OMP_WAIT_POLICY");
  const std::string saved = before ? before : "";
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  bool led = true;
  Visits loop;
  run_as_team([&] {
    led = ThreadTeam::current() != nullptr;
    on_every_thread([&](int thread, int count) { loop.record(thread, count, 2); });
  });
  if (before) setenv("OMP_WAIT_POLICY", saved.c_str(), 1);
  else unsetenv("OMP_WAIT_POLICY");
  EXPECT_FALSE(led);
  EXPECT_EQ(loop.runs[0].load() + loop.runs[1].load(), 2);
  EXPECT_EQ(loop.wrong_count.load(), 0);
  EXPECT_TRUE(ThreadTeam::wanted());
}

TEST(ThreadTeam, ExceptionsReachTheCallerAndTheNextTeamWorks) {
  Threads threads(2);
  EXPECT_THROW(run_as_team([] { fail("from the pass"); }), Error);
  std::atomic<int> other_thread_ran{0};
  EXPECT_THROW(run_as_team([&] {
                 on_every_thread([&](int thread, int) {
                   if (thread == 0) fail("from thread 0's part of a job");
                   other_thread_ran.fetch_add(1);
                 });
               }),
               Error);
  EXPECT_EQ(other_thread_ran.load(), 1);  // the job's other part ran to its end first
  // From another thread's part: an exception leaving an OpenMP thread would end the program.
  std::atomic<int> thread_zero_done{0};
  EXPECT_THROW(run_as_team([&] {
                 on_every_thread([&](int thread, int) {
                   if (thread == 1) fail("from thread 1's part of a job");
                   thread_zero_done.fetch_add(thread == 0 ? 1 : 0);
                 });
               }),
               Error);
  EXPECT_EQ(thread_zero_done.load(), 1);
  std::atomic<int> runs{0};
  run_as_team([&] { on_every_thread([&](int, int) { runs.fetch_add(1); }); });
  EXPECT_EQ(runs.load(), 2);
}

}  // namespace
}  // namespace cpullm
