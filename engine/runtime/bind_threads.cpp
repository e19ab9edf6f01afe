#include "engine/runtime/bind_threads.hpp"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <cstring>

#include "engine/util/error.hpp"

namespace cpullm {

std::vector<std::vector<int>> apply_thread_plan(const Topology& topology, const ThreadPlan& plan) {
  if (!topology.is_this_system)
    fail("a plan for {} cannot be applied to this machine (it is emulated)", topology.source);
  const int threads = static_cast<int>(plan.threads.size());
  std::vector<std::vector<int>> granted(threads);
  std::vector<int> errors(threads, 0);
  omp_set_dynamic(0);  // the team must have exactly the planned threads, every time
  omp_set_num_threads(threads);
#pragma omp parallel num_threads(threads)
  {
    const int i = omp_get_thread_num();
    cpu_set_t wanted;
    CPU_ZERO(&wanted);
    if (plan.threads[i].pu >= 0) {
      CPU_SET(plan.threads[i].pu, &wanted);
    } else {
      for (int pu : plan.usable_pus) CPU_SET(pu, &wanted);
    }
    errors[i] = pthread_setaffinity_np(pthread_self(), sizeof wanted, &wanted);
    cpu_set_t now;
    if (errors[i] == 0 && pthread_getaffinity_np(pthread_self(), sizeof now, &now) == 0)
      for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &now)) granted[i].push_back(cpu);
  }
  for (int i = 0; i < threads; ++i)
    if (errors[i] != 0) fail("the OS refused to bind thread {}: {}", i, std::strerror(errors[i]));
  return granted;
}

}  // namespace cpullm
