#include "harness/bench/llama_numa.hpp"

#include <sched.h>

#include <algorithm>

#include "engine/util/error.hpp"

namespace cpullm {
namespace {

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) fail("--numa numactl: cannot read this process's CPU affinity");
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

}  // namespace

NumaMapping map_llama_numa(const std::string& mode, const Topology& topology) {
  if (mode == "distribute") return {"numa", "", "first-touch"};
  if (mode == "numactl") return {"none", format_cpu_list(affinity_cpus()), "first-touch"};
  if (mode == "isolate") {
    const int here = sched_getcpu();
    int node = 0;
    for (const Core& core : topology.cores)
      for (int pu : core.pus)
        if (pu == here) node = core.node;
    std::vector<int> cpus;
    for (const Core& core : topology.cores)
      if (core.node == node) cpus.insert(cpus.end(), core.pus.begin(), core.pus.end());
    std::sort(cpus.begin(), cpus.end());
    return {"compact", format_cpu_list(cpus), "first-touch"};
  }
  fail("--numa: unknown mode '{}' (distribute, isolate or numactl)", mode);
}

}  // namespace cpullm
