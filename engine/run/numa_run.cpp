#include "engine/run/numa_run.hpp"

#include <chrono>
#include <cstdio>

#include "engine/runtime/numa_memory.hpp"
#include "engine/runtime/placement.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

std::string mib_per_node(const std::map<int, uint64_t>& bytes) {
  std::string text;
  for (const auto& [node, b] : bytes)
    text += fmt::format("{}{} {:.1f} MiB", text.empty() ? "" : ", ", node < 0 ? "not present" : fmt::format("node {}", node),
                        b / 1048576.0);
  return text;
}

}  // namespace

std::shared_ptr<TensorParallel> start_tensor_parallel(const RunConfig& config) {
  if (config.numa.empty()) return nullptr;
  if (config.numa != "mpi") fail("--numa {}: the engine takes --numa mpi (weight placement is --placement)", config.numa);
  if (config.placement != "first-touch")
    fail("--numa mpi with --placement {}: choose one (under MPI each rank already reads only its own rows)",
         config.placement);
  auto parallel = std::make_shared<TensorParallel>();
  if (parallel->rank() != 0) {
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
  }
  return parallel;
}

std::shared_ptr<WeightPlacement> plan_weight_placement(const RunConfig& config, const Topology& topology,
                                                       RunReport& report) {
  const NumaStrategy requested = parse_numa_strategy(config.placement);
  report.placement = std::string(numa_strategy_name(requested));
  if (requested == NumaStrategy::first_touch) return nullptr;
  const ThreadPlan thread_plan = plan_threads(topology, thread_request(config));
  const PlacementPlan plan = plan_placement(topology, thread_plan, requested, gguf_tensor_sizes(config.model));
  report.notes.insert(report.notes.end(), plan.notes.begin(), plan.notes.end());
  report.placement = std::string(numa_strategy_name(plan.strategy));
  if (plan.strategy == NumaStrategy::first_touch) return nullptr;
  std::vector<int> node_os_indices, thread_nodes;
  for (const NumaNode& node : topology.nodes) node_os_indices.push_back(node.os_index);
  if (thread_plan.policy != BindPolicy::none)
    for (const ThreadSlot& slot : thread_plan.threads) thread_nodes.push_back(slot.node);
  return std::make_shared<WeightPlacement>(plan.strategy, node_os_indices, thread_nodes);
}

std::string place_weights(WeightPlacement& placement, const Model& model) {
  const auto start = std::chrono::steady_clock::now();
  for (const WeightMatrix* matrix : projection_matrices(model.weights())) placement.place(*matrix);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return fmt::format("placement {}: {:.1f} MiB of weights copied in {:.0f} ms into private memory (not shared with "
                     "other processes, unlike the file mapping); pages (move_pages): {}",
                     numa_strategy_name(placement.strategy()), placement.copied_bytes() / 1048576.0, ms,
                     mib_per_node(placement.resident_bytes_per_node()));
}

std::string rank_memory(const TensorParallel& parallel, const Model& model) {
  const auto mapping = model.file().bytes();
  uint64_t resident = 0;
  for (const auto& [node, bytes] : bytes_per_node(mapping.data(), mapping.size()))
    if (node >= 0) resident += bytes;
  std::string per_rank;
  for (double mib : parallel.all_gather_value(resident / 1048576.0))
    per_rank += fmt::format("{}{:.1f}", per_rank.empty() ? "" : ", ", mib);
  return fmt::format("--numa mpi: model file resident per rank: {} MiB of {:.1f} MiB", per_rank,
                     mapping.size() / 1048576.0);
}

}  // namespace cpullm
