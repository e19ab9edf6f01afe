// llama-bench's --numa modes in cpullm's terms: a binding policy, a CPU set and a weight
// placement. docs/bench.md has the table and why.
#pragma once
#include <string>

#include "engine/runtime/topology.hpp"

namespace cpullm {

struct NumaMapping {
  std::string binding;    // --bind
  std::string cpuset;     // --cpuset ("" : every CPU)
  std::string placement;  // --placement
};

// distribute: threads spread evenly over the nodes (bind numa), weights where first touched.
// isolate:    threads only on the node the process started on (cpuset = its CPUs, bind compact).
// numactl:    the CPUs numactl (or taskset) left this process, unbound; numactl's memory policy
//             is inherited as it is. Error for another name.
NumaMapping map_llama_numa(const std::string& mode, const Topology& topology);

}  // namespace cpullm
