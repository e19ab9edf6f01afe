#include "engine/runtime/placement.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "engine/format/gguf.hpp"
#include "engine/format/llama_tensors.hpp"
#include "engine/runtime/row_split.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

uint64_t row_bytes(const TensorSize& t) { return t.bytes / static_cast<uint64_t>(t.rows); }

// Nodes that hold cores: where threads can run, so where copies of the weights are useful.
std::vector<std::size_t> nodes_with_cores(const Topology& topology) {
  std::vector<std::size_t> nodes;
  for (const Core& core : topology.cores)
    if (std::find(nodes.begin(), nodes.end(), static_cast<std::size_t>(core.node)) == nodes.end())
      nodes.push_back(static_cast<std::size_t>(core.node));
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

// First touch with bound threads: the engine's matvec splits rows over threads with
// schedule(static), so each thread's share lands on its node if it is the first to read it.
void place_first_touch(PlacementPlan& plan, const ThreadPlan& threads, const std::vector<TensorSize>& tensors) {
  const std::vector<int64_t> equal(threads.threads.size(), 1);
  for (const TensorSize& t : tensors) {
    const std::vector<int64_t> rows = split_proportionally(t.rows, equal);
    for (std::size_t i = 0; i < rows.size(); ++i)
      plan.bytes_per_node[static_cast<std::size_t>(threads.threads[i].node)] += static_cast<uint64_t>(rows[i]) * row_bytes(t);
  }
  plan.notes.push_back(
      "first-touch: a page lands on the node of the first thread to read it; the bytes assume the threads "
      "computing a row are its first readers (cold page cache, OpenMP's static row split); pages already in "
      "the page cache stay where they are");
}

void place_shard(PlacementPlan& plan, const Topology& topology, const ThreadPlan& threads,
                 const std::vector<TensorSize>& tensors) {
  const std::vector<int> per_node = threads_per_node(topology, threads);
  const std::vector<int64_t> weights(per_node.begin(), per_node.end());
  for (const TensorSize& t : tensors) {
    const std::vector<int64_t> rows = split_proportionally(t.rows, weights);
    TensorShard shard{t.name, {}};
    int64_t begin = 0;
    for (std::size_t n = 0; n < rows.size(); ++n) {
      if (rows[n] == 0) continue;
      shard.ranges.push_back({static_cast<int>(n), begin, begin + rows[n]});
      plan.bytes_per_node[n] += static_cast<uint64_t>(rows[n]) * row_bytes(t);
      begin += rows[n];
    }
    plan.shards.push_back(std::move(shard));
  }
  plan.notes.push_back(
      "shard: each node holds the rows its threads compute, rows split in proportion to its threads; 1 x the weight "
      "memory, but rows copied into node-bound memory are private: processes no longer share them");
  if (threads.policy != BindPolicy::numa)
    plan.notes.push_back(fmt::format("under --bind {} a node's threads are not consecutive, so a static split of "
                                     "rows over threads does not match the shards; --bind numa keeps them together",
                                     bind_policy_name(threads.policy)));
}

}  // namespace

NumaStrategy parse_numa_strategy(std::string_view name) {
  for (NumaStrategy s : {NumaStrategy::first_touch, NumaStrategy::interleave, NumaStrategy::replicate, NumaStrategy::shard})
    if (numa_strategy_name(s) == name) return s;
  fail("unknown NUMA strategy \"{}\" (first-touch, interleave, replicate, shard)", name);
}

std::string_view numa_strategy_name(NumaStrategy strategy) {
  switch (strategy) {
    case NumaStrategy::first_touch: return "first-touch";
    case NumaStrategy::interleave: return "interleave";
    case NumaStrategy::replicate: return "replicate";
    case NumaStrategy::shard: return "shard";
  }
  return "?";
}

std::vector<TensorSize> gguf_tensor_sizes(const std::string& path) {
  const GgufFile file(path);
  std::vector<TensorSize> sizes;
  for (const GgufTensorInfo& t : file.tensors())
    sizes.push_back({t.name, t.ne[0] == 0 ? 1 : std::max<int64_t>(1, t.elements() / t.ne[0]), t.bytes});
  return sizes;
}

std::vector<TensorSize> shape_tensor_sizes(const SyntheticShape& s, GgmlType type) {
  const GgmlTypeTraits traits = *ggml_type_traits(static_cast<uint32_t>(type));
  if (s.dim % traits.block_elements != 0 || s.ffn_dim % traits.block_elements != 0)
    fail("shape {}: rows of {} or {} values are not whole {} blocks", s.name, s.dim, s.ffn_dim, traits.name);
  std::vector<TensorSize> sizes;
  for (const LlamaTensor& t : llama_tensors({s.n_layers, s.dim, s.ffn_dim, s.dim / s.n_heads * s.n_kv_heads, s.vocab_size}))
    sizes.push_back({t.name, t.rows,
                     static_cast<uint64_t>(t.matrix() ? t.rows * ggml_row_bytes(traits, t.cols) : t.cols * 4)});
  return sizes;
}

PlacementPlan plan_placement(const Topology& topology, const ThreadPlan& threads, NumaStrategy strategy,
                             const std::vector<TensorSize>& tensors) {
  PlacementPlan plan;
  plan.strategy = strategy;
  plan.bytes_per_node.assign(topology.nodes.size(), 0);
  for (const TensorSize& t : tensors) plan.weight_bytes += t.bytes;
  const bool bound = threads.policy != BindPolicy::none;

  if (topology.nodes.size() == 1) {
    if (strategy != NumaStrategy::first_touch)
      plan.notes.push_back(fmt::format("one NUMA node: {} is first-touch", numa_strategy_name(strategy)));
    plan.strategy = NumaStrategy::first_touch;
    plan.bytes_per_node[0] = plan.weight_bytes;
    return plan;
  }
  switch (plan.strategy) {
    case NumaStrategy::first_touch:
      if (bound) {
        place_first_touch(plan, threads, tensors);
      } else {
        plan.unplaced_bytes = plan.weight_bytes;
        plan.notes.push_back("first-touch with unbound threads: each page lands wherever the OS ran its first reader");
      }
      break;
    case NumaStrategy::interleave: {
      const std::vector<int64_t> parts =
          split_proportionally(static_cast<int64_t>(plan.weight_bytes), std::vector<int64_t>(topology.nodes.size(), 1));
      for (std::size_t n = 0; n < parts.size(); ++n) plan.bytes_per_node[n] = static_cast<uint64_t>(parts[n]);
      plan.notes.push_back(fmt::format(
          "interleave: pages round-robin over {} nodes (bytes per node to within a page): a thread finds 1/{} of the "
          "weights local and reads the rest over the interconnect", topology.nodes.size(), topology.nodes.size()));
      break;
    }
    case NumaStrategy::replicate: {
      const std::vector<std::size_t> copies = nodes_with_cores(topology);
      for (std::size_t n : copies) plan.bytes_per_node[n] = plan.weight_bytes;
      plan.notes.push_back(fmt::format(
          "replicate: {} copies, {} x the weight memory; the copies are private memory, so processes no longer "
          "share the page cache's copy (mmap sharing is lost)", copies.size(), copies.size()));
      break;
    }
    case NumaStrategy::shard:
      if (!bound) fail("--numa shard needs bound threads (--bind compact, scatter or numa): a node must hold the rows its threads compute");
      place_shard(plan, topology, threads, tensors);
      break;
  }
  return plan;
}

}  // namespace cpullm
