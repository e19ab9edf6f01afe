// A NUMA strategy applied to a model's weight matrices in this process: which memory each
// OpenMP thread reads its rows from.
//   first-touch  the file mapping as it is (nothing copied; processes share the page cache)
//   interleave   one copy in anonymous memory, pages round-robin over the nodes
//   replicate    one copy per node, bound to it; a thread reads its own node's copy
//   shard        one copy whose rows are bound, thread by thread, to the node of the thread
//                computing them
// Copies are private memory: mmap sharing between processes is lost, and replicate holds
// nodes x the weights. The plan (placement.hpp) decides the strategy, reduced to first-touch on
// one node; this class applies whatever it is given, so its mechanics also run (and are tested)
// on one node, with every copy bound to node 0.
#pragma once
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "engine/kernels/matvec.hpp"
#include "engine/kernels/parallel.hpp"
#include "engine/runtime/numa_memory.hpp"
#include "engine/runtime/placement.hpp"
#include "engine/runtime/row_split.hpp"

namespace cpullm {

class WeightPlacement {
 public:
  // node_os_indices: the nodes copies go to (Topology order, by OS index). thread_nodes: per
  // OpenMP thread, the index into node_os_indices of the node it is bound to; replicate and
  // shard need one entry per thread of the parallel regions that will read the weights (Error
  // otherwise), first-touch and interleave ignore it.
  WeightPlacement(NumaStrategy strategy, std::vector<int> node_os_indices, std::vector<int> thread_nodes);

  NumaStrategy strategy() const { return strategy_; }
  // Whether threads read different memory for their rows (replicate, shard): then a projection
  // must give each thread exactly its rows (for_each_thread_rows), not split rows its own way.
  bool per_thread_rows() const { return strategy_ == NumaStrategy::replicate || strategy_ == NumaStrategy::shard; }
  int threads() const { return static_cast<int>(thread_nodes_.size()); }

  // Copies `w`'s bytes where the strategy puts them (first-touch: nothing). Placing the same
  // matrix twice (a tied output) keeps the first copy.
  void place(const WeightMatrix& w);
  // The matrix threads on node `node` (index into node_os_indices) read: the copy, or `w` itself
  // when it was not placed (first-touch).
  const WeightMatrix& copy_for_node(const WeightMatrix& w, int node) const;
  // Thread `thread`'s rows of `w`: schedule(static)'s share, in whole row groups.
  RowSpan thread_share(const WeightMatrix& w, int thread) const {
    return equal_share(w.rows, thread, threads(), row_group(w));
  }
  // The node (index into node_os_indices) thread `thread` runs on.
  int thread_node(int thread) const { return thread_nodes_[static_cast<std::size_t>(thread)]; }

  uint64_t copied_bytes() const { return copied_bytes_; }  // anonymous memory holding copies
  // Every copy's pages per node OS index as the kernel reports them (bytes_per_node).
  std::map<int, uint64_t> resident_bytes_per_node() const;

 private:
  struct Placed {
    std::vector<NumaBuffer> buffers;    // (copies) replicate: one per node; otherwise one
    std::vector<WeightMatrix> per_node; // (nodes) the matrix node n's threads read
  };
  NumaStrategy strategy_;
  std::vector<int> node_os_indices_;                      // (nodes)
  std::vector<int> thread_nodes_;                         // (threads) index into node_os_indices_
  std::unordered_map<const std::byte*, Placed> placed_;   // by the file mapping's data pointer
  uint64_t copied_bytes_ = 0;
};

// Runs compute(rows, first_row) once per planned thread with that thread's rows of `w`, read from
// its node's copy: rows [first_row, first_row + rows.rows) of the full matrix. Thread t computes
// share t, and t + threads, ... where the team is smaller than the plan (apply_thread_plan sets
// OpenMP's count for the thread that calls it; a pass run from another thread gets OpenMP's
// default). The kernels called inside run on their thread alone (parallel.hpp).
template <typename Compute>
void for_each_thread_rows(const WeightPlacement& placement, const WeightMatrix& w, Compute compute) {
  on_every_thread([&](int thread, int threads) {
    for (int planned = thread; planned < placement.threads(); planned += threads) {
      const RowSpan share = placement.thread_share(w, planned);
      if (share.end > share.begin)
        compute(row_slice(placement.copy_for_node(w, placement.thread_node(planned)), share), share.begin);
    }
  }, placement.threads());
}

}  // namespace cpullm
