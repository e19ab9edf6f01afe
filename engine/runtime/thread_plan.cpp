#include "engine/runtime/thread_plan.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// A core threads may use, and the PU a thread on it is bound to.
struct UsableCore {
  int core;  // index into Topology::cores
  int pu;    // OS index: the core's first PU inside the cpuset
};

std::vector<UsableCore> usable_cores(const Topology& topology, const ThreadRequest& request) {
  const std::vector<int> pus = all_pus(topology);
  for (int cpu : request.cpuset)
    if (!std::binary_search(pus.begin(), pus.end(), cpu))
      fail("cpuset: CPU {} does not exist on this topology (CPUs {})", cpu, format_cpu_list(pus));
  const auto allowed = [&](int pu) {
    return request.cpuset.empty() || std::binary_search(request.cpuset.begin(), request.cpuset.end(), pu);
  };
  if (request.housekeeping < 0) fail("housekeeping: {} cores per node is negative", request.housekeeping);

  std::vector<int> skipped_on_node(topology.nodes.size(), 0);
  std::vector<UsableCore> usable;
  for (std::size_t c = 0; c < topology.cores.size(); ++c) {
    const Core& core = topology.cores[c];
    const auto pu = std::find_if(core.pus.begin(), core.pus.end(), allowed);
    if (pu == core.pus.end()) continue;
    const std::size_t node = static_cast<std::size_t>(core.node);
    if (skipped_on_node[node] < request.housekeeping) {  // hwloc's order: the lowest-numbered go to the OS
      ++skipped_on_node[node];
      continue;
    }
    usable.push_back({static_cast<int>(c), *pu});
  }
  if (usable.empty())
    fail("no usable core: cpuset {}, {} core(s) per node left to the OS",
         request.cpuset.empty() ? "all CPUs" : format_cpu_list(request.cpuset), request.housekeeping);
  return usable;
}

// The usable cores split by a key (package or node), groups in order of the key's first core.
std::vector<std::vector<UsableCore>> group_by(const std::vector<UsableCore>& usable, auto key) {
  std::vector<int> keys;
  std::vector<std::vector<UsableCore>> groups;
  for (const UsableCore& u : usable) {
    const auto at = std::find(keys.begin(), keys.end(), key(u));
    if (at == keys.end()) {
      keys.push_back(key(u));
      groups.push_back({u});
    } else {
      groups[static_cast<std::size_t>(at - keys.begin())].push_back(u);
    }
  }
  return groups;
}

// Deals `threads` out one at a time, round-robin over the groups, skipping full ones: thread i's
// group. Scatter keeps this order; numa sorts it so each group's threads are consecutive.
std::vector<std::size_t> deal_round_robin(const std::vector<std::vector<UsableCore>>& groups, int threads) {
  std::vector<std::size_t> dealt, taken(groups.size(), 0);
  for (std::size_t g = 0; static_cast<int>(dealt.size()) < threads; g = (g + 1) % groups.size())
    if (taken[g] < groups[g].size()) {
      ++taken[g];
      dealt.push_back(g);
    }
  return dealt;
}

}  // namespace

BindPolicy parse_bind_policy(std::string_view name) {
  for (BindPolicy p : {BindPolicy::none, BindPolicy::compact, BindPolicy::scatter, BindPolicy::numa})
    if (bind_policy_name(p) == name) return p;
  fail("unknown binding policy \"{}\" (none, compact, scatter, numa)", name);
}

std::string_view bind_policy_name(BindPolicy policy) {
  switch (policy) {
    case BindPolicy::none: return "none";
    case BindPolicy::compact: return "compact";
    case BindPolicy::scatter: return "scatter";
    case BindPolicy::numa: return "numa";
  }
  return "?";
}

ThreadPlan plan_threads(const Topology& topology, const ThreadRequest& request) {
  const std::vector<UsableCore> usable = usable_cores(topology, request);
  const int cores = static_cast<int>(usable.size());
  if (request.threads < 0) fail("threads: {} is negative", request.threads);
  const int threads = request.threads == 0 ? cores : request.threads;
  if (threads > cores)
    fail("{} threads but {} usable core(s): one thread per core, and more would share cores", threads, cores);

  ThreadPlan plan;
  plan.policy = request.policy;
  for (const UsableCore& u : usable) plan.usable_pus.push_back(u.pu);
  const auto slot = [&](const UsableCore& u) {
    return ThreadSlot{u.pu, u.core, topology.cores[static_cast<std::size_t>(u.core)].node};
  };

  const auto by_package = group_by(usable, [&](const UsableCore& u) { return topology.cores[u.core].package; });
  const auto by_node = group_by(usable, [&](const UsableCore& u) { return topology.cores[u.core].node; });
  if (plan.policy == BindPolicy::scatter && by_package.size() == 1) {
    plan.notes.push_back("scatter over 1 package is compact");
    plan.policy = BindPolicy::compact;
  }
  if (plan.policy == BindPolicy::numa && by_node.size() == 1) {
    plan.notes.push_back("numa binding over 1 NUMA node is compact");
    plan.policy = BindPolicy::compact;
  }

  switch (plan.policy) {
    case BindPolicy::none: {
      std::vector<int> cpus = plan.usable_pus;
      std::sort(cpus.begin(), cpus.end());
      plan.threads.assign(static_cast<std::size_t>(threads), ThreadSlot{});
      plan.notes.push_back(fmt::format("threads are not bound: the OS places them on CPUs {}", format_cpu_list(cpus)));
      break;
    }
    case BindPolicy::compact:
      for (int t = 0; t < threads; ++t) plan.threads.push_back(slot(usable[static_cast<std::size_t>(t)]));
      break;
    case BindPolicy::scatter:
    case BindPolicy::numa: {
      const auto& groups = plan.policy == BindPolicy::scatter ? by_package : by_node;
      std::vector<std::size_t> dealt = deal_round_robin(groups, threads);
      if (plan.policy == BindPolicy::numa) std::stable_sort(dealt.begin(), dealt.end());
      std::vector<std::size_t> next(groups.size(), 0);
      for (std::size_t g : dealt) plan.threads.push_back(slot(groups[g][next[g]++]));
      break;
    }
  }
  return plan;
}

std::vector<int> threads_per_node(const Topology& topology, const ThreadPlan& plan) {
  std::vector<int> counts(topology.nodes.size(), 0);
  for (const ThreadSlot& t : plan.threads)
    if (t.node >= 0) ++counts[static_cast<std::size_t>(t.node)];
  return counts;
}

}  // namespace cpullm
