// What the host is: /proc, /sys, uname and hwloc. Anything unreadable is recorded as such,
// never guessed.
#include "harness/results/host_info.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <string_view>

#include "engine/kernels/isa.hpp"
#include "engine/runtime/topology.hpp"

namespace cpullm {
namespace {

// The value of the first "key<spaces/tabs>: value" line of a /proc file, or "".
std::string proc_field(const char* path, std::string_view key) {
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    if (!line.starts_with(key)) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos || line.find_first_not_of(" \t", key.size()) != colon) continue;
    const size_t value = line.find_first_not_of(" \t", colon + 1);
    return value == std::string::npos ? "" : line.substr(value);
  }
  return "";
}

std::string first_line(const char* path) {
  std::ifstream file(path);
  std::string line;
  std::getline(file, line);
  return line;
}

}  // namespace

HostInfo detect_host() {
  HostInfo host;
  char name[256] = {};
  host.hostname = gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
  host.cpu_model = proc_field("/proc/cpuinfo", "model name");
  if (host.cpu_model.empty()) host.cpu_model = "unknown";
  const Topology topology = detect_topology();
  host.cores = static_cast<int64_t>(topology.cores.size());
  host.sockets = topology.package_count;
  host.numa_nodes = static_cast<int64_t>(topology.nodes.size());
  host.memory_bytes = std::atoll(proc_field("/proc/meminfo", "MemTotal").c_str()) * 1024;  // "24590000 kB"; 0 if absent
  utsname uts{};
  host.kernel = uname(&uts) == 0 ? uts.release : "unknown";
  host.isa_level = std::string(isa_name(best_isa()));
  host.governor = first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  if (host.governor.empty()) host.governor = "unavailable (no cpufreq in /sys)";
  host.fingerprint = host_fingerprint(host);
  return host;
}

std::string host_fingerprint(const HostInfo& host) {
  constexpr int64_t gib = int64_t{1} << 30;
  const std::string identity = host.cpu_model + '\n' + std::to_string(host.cores) + '\n' + std::to_string(host.sockets) + '\n' +
                               std::to_string(host.numa_nodes) + '\n' + std::to_string((host.memory_bytes + gib / 2) / gib);
  uint64_t hash = 14695981039346656037ull;  // FNV-1a, 64 bits: stable across builds and machines
  for (const unsigned char c : identity) hash = (hash ^ c) * 1099511628211ull;
  return fmt::format("{:016x}", hash);
}

}  // namespace cpullm
