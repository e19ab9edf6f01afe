// The host a run measured: what makes two runs comparable. Stored with every run.
#pragma once
#include <cstdint>
#include <string>

namespace cpullm {

struct HostInfo {
  std::string hostname;
  std::string cpu_model;     // /proc/cpuinfo "model name"
  int64_t cores = 0;         // physical cores (hwloc)
  int64_t sockets = 0;       // packages (hwloc)
  int64_t numa_nodes = 0;    // NUMA nodes (hwloc)
  int64_t memory_bytes = 0;  // MemTotal
  std::string kernel;        // uname -r
  std::string isa_level;     // the best kernel level this CPU runs: scalar, avx2, avx512
  std::string governor;      // cpu0's cpufreq scaling governor, or "unavailable"
  std::string fingerprint;   // host_fingerprint(): equal means "the same machine"
};

// This machine.
HostInfo detect_host();

// 16 hex digits hashing cpu_model, cores, sockets, numa_nodes and memory rounded to GiB (the
// kernel's MemTotal moves by a few MiB between kernel versions; the machine has not changed).
std::string host_fingerprint(const HostInfo& host);

}  // namespace cpullm
