// Which thread runs on which processor: the binding policies over a Topology. A plan is data;
// it is printed by `cpullm topo` and applied only on the machine it was computed for.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "engine/runtime/topology.hpp"

namespace cpullm {

enum class BindPolicy {
  none,     // threads are not bound: the OS moves them (within the cpuset, if one is given)
  compact,  // fill cores in hwloc's order: package 0's cores first
  scatter,  // round-robin over packages: thread 0 on package 0, thread 1 on package 1, ...
  numa,     // threads split evenly over nodes, each node's threads consecutive and kept on it
};
BindPolicy parse_bind_policy(std::string_view name);  // Error for an unknown name
std::string_view bind_policy_name(BindPolicy policy);

struct ThreadRequest {
  int threads = 0;          // 0: one per usable core
  BindPolicy policy = BindPolicy::none;
  std::vector<int> cpuset;  // OS indices of the PUs threads may use, ascending (parse_cpu_list); empty: all
  int housekeeping = 0;     // cores per node left to the OS: the lowest-numbered usable ones
};

struct ThreadSlot {
  int pu = -1;    // OS index of the PU the thread is bound to; -1 when not bound
  int core = -1;  // index into Topology::cores; -1 when not bound
  int node = -1;  // index into Topology::nodes; -1 when not bound
};

struct ThreadPlan {
  BindPolicy policy = BindPolicy::none;  // what the plan does: the request reduced where the topology offers nothing to spread over
  std::vector<int> usable_pus;           // one PU per usable core, after the cpuset and housekeeping
  std::vector<ThreadSlot> threads;       // one per thread, thread i at [i]
  std::vector<std::string> notes;        // reductions and caveats, in sentences
};

// One thread per core (the E5 v4 has no SMT, and bandwidth-bound matvecs gain nothing from a
// sibling). Errors: a cpuset CPU the topology lacks, nothing left after cpuset and housekeeping,
// more bound threads than usable cores.
ThreadPlan plan_threads(const Topology& topology, const ThreadRequest& request);

// Threads per node, indexed like Topology::nodes (all zero for an unbound plan).
std::vector<int> threads_per_node(const Topology& topology, const ThreadPlan& plan);

}  // namespace cpullm
