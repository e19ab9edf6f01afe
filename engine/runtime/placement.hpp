// Which NUMA node holds which weights: the placement strategies over a Topology and a
// ThreadPlan. Like the thread plan, this is data: computed anywhere, applied only on the
// machine it describes. docs/topology.md explains each strategy's memory cost.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/format/ggml_types.hpp"
#include "engine/runtime/thread_plan.hpp"
#include "engine/runtime/topology.hpp"
#include "engine/synthetic/synthetic_model.hpp"

namespace cpullm {

enum class NumaStrategy {
  first_touch,  // the kernel's default: a page lands on the node of the first thread to read it
  interleave,   // pages round-robin over the nodes (numactl --interleave=all)
  replicate,    // a private copy of the weights on every node; each thread reads its node's copy
  shard,        // each node holds the rows its threads compute, rows split in proportion to its threads
};
NumaStrategy parse_numa_strategy(std::string_view name);  // Error for an unknown name
std::string_view numa_strategy_name(NumaStrategy strategy);

struct TensorSize {
  std::string name;  // llama.cpp's tensor name
  int64_t rows = 1;  // rows a matvec splits over threads: ne[1]*ne[2]*ne[3]; 1 for a vector
  uint64_t bytes = 0;  // the whole tensor; every row has the same size
};

// The tensors of a GGUF file, and of a named LLaMA shape with its matrices in `type` (norms F32).
std::vector<TensorSize> gguf_tensor_sizes(const std::string& path);
std::vector<TensorSize> shape_tensor_sizes(const SyntheticShape& shape, GgmlType type);

struct RowRange {
  int node = 0;       // index into Topology::nodes
  int64_t begin = 0;  // first row
  int64_t end = 0;    // one past the last row
};

struct TensorShard {
  std::string name;              // the tensor
  std::vector<RowRange> ranges;  // consecutive, covering [0, rows), in node order; nodes given no rows left out
};

struct PlacementPlan {
  NumaStrategy strategy = NumaStrategy::first_touch;  // what the plan does: the request reduced on one node
  uint64_t weight_bytes = 0;               // all tensors once
  std::vector<uint64_t> bytes_per_node;    // indexed like Topology::nodes; sums to weight_bytes x copies
  uint64_t unplaced_bytes = 0;             // first-touch with unbound threads: whichever node the OS ran the reader on
  std::vector<TensorShard> shards;         // shard only: every tensor's rows per node
  std::vector<std::string> notes;          // reductions, assumptions and costs, in sentences
};

// Error: shard with unbound threads (the rows a node holds must be the rows its threads compute).
PlacementPlan plan_placement(const Topology& topology, const ThreadPlan& threads, NumaStrategy strategy,
                             const std::vector<TensorSize>& tensors);

}  // namespace cpullm
