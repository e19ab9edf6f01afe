#include "cli/numa_run.hpp"

#include <chrono>
#include <cstdio>

#include "engine/runtime/numa_memory.hpp"
#include "engine/runtime/placement.hpp"
#include "engine/runtime/topology.hpp"
#include "engine/util/error.hpp"

namespace cpullm::cli {
namespace {

std::string mib_per_node(const std::map<int, uint64_t>& bytes) {
  std::string text;
  for (const auto& [node, b] : bytes)
    text += fmt::format("{}{} {:.1f} MiB", text.empty() ? "" : ", ", node < 0 ? "not present" : fmt::format("node {}", node),
                        b / 1048576.0);
  return text;
}

}  // namespace

void add_numa_options(CLI::App& command, NumaOptions& numa) {
  command.add_option("--placement", numa.placement,
                     "NUMA weight placement: first-touch (the file mapping as it is), interleave, replicate (a copy per "
                     "node), shard (each node the rows its threads compute); copies are private memory");
  command.add_option("--numa", numa.numa,
                     "mpi: tensor parallelism, one process per NUMA node or host started by mpirun, each computing its "
                     "share of every projection");
}

std::shared_ptr<TensorParallel> start_tensor_parallel(const NumaOptions& numa) {
  if (numa.numa.empty()) return nullptr;
  if (numa.numa != "mpi") fail("--numa {}: generate takes --numa mpi (weight placement is --placement)", numa.numa);
  if (numa.placement != "first-touch")
    fail("--numa mpi with --placement {}: choose one (under MPI each rank already reads only its own rows)",
         numa.placement);
  auto parallel = std::make_shared<TensorParallel>();
  if (parallel->rank() != 0) {
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
  }
  std::fprintf(stderr,
               "cpullm: --numa mpi: %d ranks; each computes its share of every projection's rows, then an allgather "
               "gives every rank all of them (rank 0 prints)\n",
               parallel->size());
  return parallel;
}

std::shared_ptr<WeightPlacement> plan_weight_placement(const NumaOptions& numa, const BindingOptions& binding,
                                                       int threads, const std::string& model_path) {
  const NumaStrategy requested = parse_numa_strategy(numa.placement);
  if (requested == NumaStrategy::first_touch) return nullptr;
  const Topology topology = detect_topology();
  const ThreadPlan thread_plan = plan_threads(topology, thread_request(binding, threads));
  const PlacementPlan plan = plan_placement(topology, thread_plan, requested, gguf_tensor_sizes(model_path));
  for (const std::string& note : plan.notes) std::fprintf(stderr, "cpullm: note: %s\n", note.c_str());
  if (plan.strategy == NumaStrategy::first_touch) return nullptr;
  std::vector<int> node_os_indices, thread_nodes;
  for (const NumaNode& node : topology.nodes) node_os_indices.push_back(node.os_index);
  if (thread_plan.policy != BindPolicy::none)
    for (const ThreadSlot& slot : thread_plan.threads) thread_nodes.push_back(slot.node);
  return std::make_shared<WeightPlacement>(plan.strategy, node_os_indices, thread_nodes);
}

void place_weights(WeightPlacement& placement, const Model& model) {
  const auto start = std::chrono::steady_clock::now();
  for (const WeightMatrix* matrix : projection_matrices(model.weights())) placement.place(*matrix);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr,
               "cpullm: placement %s: %.1f MiB of weights copied in %.0f ms into private memory (not shared with "
               "other processes, unlike the file mapping); pages (move_pages): %s\n",
               std::string(numa_strategy_name(placement.strategy())).c_str(), placement.copied_bytes() / 1048576.0, ms,
               mib_per_node(placement.resident_bytes_per_node()).c_str());
}

void print_rank_memory(const TensorParallel& parallel, const Model& model) {
  const auto mapping = model.file().bytes();
  uint64_t resident = 0;
  for (const auto& [node, bytes] : bytes_per_node(mapping.data(), mapping.size()))
    if (node >= 0) resident += bytes;
  std::string per_rank;
  for (double mib : parallel.all_gather_value(resident / 1048576.0))
    per_rank += fmt::format("{}{:.1f}", per_rank.empty() ? "" : ", ", mib);
  std::fprintf(stderr, "cpullm: --numa mpi: model file resident per rank: %s MiB of %.1f MiB\n", per_rank.c_str(),
               mapping.size() / 1048576.0);
}

}  // namespace cpullm::cli
