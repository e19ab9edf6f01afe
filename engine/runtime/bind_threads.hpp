// Applies a thread plan to this process: OpenMP's team gets the plan's thread count, and each
// thread pins itself to its planned CPU (or, unbound, to the usable CPUs). libgomp keeps the
// same threads for every later parallel region of that size, so the pinning holds for the run.
#pragma once
#include <vector>

#include "engine/runtime/thread_plan.hpp"
#include "engine/runtime/topology.hpp"

namespace cpullm {

// Returns, per thread, the CPUs the kernel reports it may now run on: read back, so what is
// printed is what the OS accepted. An emulated topology, or an affinity the OS refuses, is an
// Error. Call before the first parallel region (threads created earlier keep their masks).
std::vector<std::vector<int>> apply_thread_plan(const Topology& topology, const ThreadPlan& plan);

}  // namespace cpullm
