#include "engine/kernels/parallel.hpp"

#include <strings.h>

#include <cstdlib>

namespace cpullm {
namespace {
thread_local ThreadTeam* led_team = nullptr;  // set on a team's thread 0 between lead and close
}  // namespace

ThreadTeam* ThreadTeam::current() { return led_team && !led_team->busy_ ? led_team : nullptr; }

std::string describe_dispatch(int threads) {
  if (threads <= 1) return "one thread, no parallel regions";
  if (!ThreadTeam::wanted()) return "an OpenMP region per parallel op (OMP_WAIT_POLICY=passive: no thread team)";
  return "one thread team per forward pass, each parallel op a job";
}

bool ThreadTeam::wanted() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  return policy == nullptr || strcasecmp(policy, "passive") != 0;
}

void ThreadTeam::lead(int threads) {
  threads_ = threads;
  led_team = this;
}

void ThreadTeam::close() {
  led_team = nullptr;
  closing_ = true;
  generation_.fetch_add(1, std::memory_order_release);
}

void ThreadTeam::serve(int thread) {
  // The generation a job or the close leaves behind; the team starts at 0, so a thread that
  // arrives after the first job was posted still sees it. Thread 0 posts the next job only
  // after every thread has finished this one, so none is skipped.
  for (uint64_t seen = 0;;) {
    wait_until([&] { return generation_.load(std::memory_order_acquire) != seen; });
    seen = generation_.load(std::memory_order_acquire);
    if (closing_) return;
    try {
      call_(job_, thread, threads_);
    } catch (...) {  // an exception leaving an OpenMP thread would terminate the program
      if (!worker_failed_.exchange(true, std::memory_order_relaxed)) worker_error_ = std::current_exception();
    }
    unfinished_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace cpullm
