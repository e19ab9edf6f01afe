// The machine as the thread and placement plans see it: packages, NUMA nodes, cores and their
// caches. hwloc discovers it, or builds it from a synthetic description or an XML file, so the
// plans for a 4-socket server can be computed (and tested) on any machine.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cpullm {

struct NumaNode {
  int os_index = 0;           // the kernel's node number (numactl --membind=N)
  uint64_t memory_bytes = 0;  // memory local to this node
  int package = -1;           // index into Topology's packages holding it; -1 for a node without CPUs
};

struct Core {
  int package = 0;        // index of its package, 0..package_count-1 in hwloc's order
  int node = 0;           // index into Topology::nodes of the node its memory accesses are local to
  std::vector<int> pus;   // OS indices of its processing units (more than one with SMT), ascending
};

struct CacheLevel {
  std::string name;         // "L1d", "L2", "L3"
  uint64_t size_bytes = 0;  // one instance's size
  int count = 0;            // instances in the machine
  int cores_sharing = 0;    // cores below one instance
};

struct Topology {
  std::string source;            // where it came from: "this machine (hwloc)", "hwloc synthetic: ...", "hwloc XML: FILE"
  bool is_this_system = false;   // hwloc's verdict: plans may be applied only when true
  int package_count = 0;         // sockets; a machine hwloc reports none for counts as one
  std::vector<NumaNode> nodes;   // in hwloc's order; never empty
  std::vector<Core> cores;       // in hwloc's order (package by package); never empty
  std::vector<CacheLevel> caches;  // data and unified caches, L1d first; levels hwloc does not report are absent
  std::vector<int> isolated_cpus;  // /sys/devices/system/cpu/isolated on this machine; empty when emulated
};

// This machine, as hwloc sees it.
Topology detect_topology();
// An hwloc synthetic description, e.g. "pack:4 [numa(memory=64GiB)] l3:1(size=25MiB) core:10 pu:1".
Topology synthetic_topology(const std::string& description);
// An XML file written by `lstopo --of xml` (on this or another machine).
Topology xml_topology(const std::string& path);

// Every PU's OS index, ascending.
std::vector<int> all_pus(const Topology& topology);

// "2-31,40" -> {2..31, 40}, the kernel's CPU-list syntax (isolcpus, taskset -c, sysfs). Sorted,
// without duplicates; an empty or malformed list is an Error.
std::vector<int> parse_cpu_list(std::string_view list);
// The inverse: {0,1,2,5} -> "0-2,5"; "" for an empty set.
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace cpullm
