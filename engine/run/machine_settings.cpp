#include "engine/run/machine_settings.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include "engine/kernels/isa.hpp"
#include "engine/kernels/matmul.hpp"
#include "engine/runtime/bind_threads.hpp"

namespace cpullm {

bool binding_given(const RunConfig& config) {
  return config.bind != "none" || !config.cpuset.empty() || config.housekeeping > 0;
}

ThreadRequest thread_request(const RunConfig& config) {
  ThreadRequest request;
  request.threads = config.threads;
  request.policy = parse_bind_policy(config.bind);
  if (!config.cpuset.empty()) request.cpuset = parse_cpu_list(config.cpuset);
  request.housekeeping = config.housekeeping;
  return request;
}

RunReport apply_machine_settings(const RunConfig& config, const Topology& topology) {
  RunReport report;
  report.kernels.isa = resolve_isa(config.isa);

  // The plan sets OpenMP's thread count (one per usable core at -t 0) and pins every thread:
  // to its CPU when bound, otherwise to the usable CPUs.
  const ThreadPlan plan = plan_threads(topology, thread_request(config));
  const std::vector<std::vector<int>> granted = apply_thread_plan(topology, plan);
  for (std::size_t i = 0; i < granted.size(); ++i)
    report.thread_cpus += fmt::format("{}thread {} on CPU {}", i ? ", " : "", i, format_cpu_list(granted[i]));
  report.binding = std::string(bind_policy_name(plan.policy));
  report.threads = omp_get_max_threads();
  // An unbound run's plan says only that its threads are unbound: news to no one who asked nothing.
  if (binding_given(config)) report.notes = plan.notes;

  report.kernels.caches =
      topology_cache_sizes(config.cache_topology ? *config.cache_topology : topology, report.cache_blocking);
  return report;
}

CacheSizes topology_cache_sizes(const Topology& topology, std::string& described) {
  CacheSizes sizes = sysconf_cache_sizes();
  std::vector<std::string> missing;
  const auto take = [&](const char* name, int64_t& bytes) {
    for (const CacheLevel& cache : topology.caches)
      if (cache.name == name && cache.size_bytes > 0) {
        bytes = static_cast<int64_t>(cache.size_bytes);
        return;
      }
    missing.push_back(name);
  };
  take("L1d", sizes.l1d_bytes);
  take("L2", sizes.l2_bytes);
  check_cache_sizes(sizes);
  described = fmt::format("GEMM blocked for an L1d of {} KiB and an L2 of {} KiB per core ({}{})", sizes.l1d_bytes / 1024,
                     sizes.l2_bytes / 1024, topology.source,
                     missing.empty() ? "" : fmt::format("; {} from sysconf: not reported", fmt::join(missing, ", ")));
  return sizes;
}

}  // namespace cpullm
