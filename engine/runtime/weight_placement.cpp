#include "engine/runtime/weight_placement.hpp"

#include <cstring>

#include "engine/util/error.hpp"

namespace cpullm {

WeightPlacement::WeightPlacement(NumaStrategy strategy, std::vector<int> node_os_indices, std::vector<int> thread_nodes)
    : strategy_(strategy), node_os_indices_(std::move(node_os_indices)), thread_nodes_(std::move(thread_nodes)) {
  if (node_os_indices_.empty()) fail("NUMA placement: no nodes to place weights on");
  for (int node : thread_nodes_)
    if (node < 0 || node >= static_cast<int>(node_os_indices_.size()))
      fail("NUMA placement: a thread's node {} is not one of the {} nodes", node, node_os_indices_.size());
  if (per_thread_rows() && thread_nodes_.empty())
    fail("--placement replicate and shard need bound threads (--bind compact, scatter or numa): each thread must read "
         "the rows on its node");
}

void WeightPlacement::place(const WeightMatrix& w) {
  if (strategy_ == NumaStrategy::first_touch || placed_.contains(w.data)) return;
  const std::size_t bytes = static_cast<std::size_t>(w.rows * row_bytes(w));
  Placed placed;
  // A buffer gets its policy first; the copy then allocates every page where the policy says,
  // whichever thread writes it.
  const auto copy_into = [&](NumaBuffer buffer) {
    std::memcpy(buffer.data(), w.data, bytes);
    copied_bytes_ += bytes;
    placed.buffers.push_back(std::move(buffer));
    return WeightMatrix{placed.buffers.back().data(), w.type, w.rows, w.cols};
  };
  switch (strategy_) {
    case NumaStrategy::first_touch: break;
    case NumaStrategy::interleave: {
      NumaBuffer buffer(bytes);
      buffer.interleave(node_os_indices_);
      placed.per_node.assign(node_os_indices_.size(), copy_into(std::move(buffer)));
      break;
    }
    case NumaStrategy::replicate:
      for (int node_os : node_os_indices_) {
        NumaBuffer buffer(bytes);
        buffer.bind(0, bytes, node_os);
        placed.per_node.push_back(copy_into(std::move(buffer)));
      }
      break;
    case NumaStrategy::shard: {
      NumaBuffer buffer(bytes);
      const int64_t stride = row_bytes(w);
      for (int t = 0; t < threads(); ++t) {
        const RowSpan rows = thread_share(w, t);
        buffer.bind(static_cast<std::size_t>(rows.begin * stride), static_cast<std::size_t>(rows.end * stride),
                    node_os_indices_[static_cast<std::size_t>(thread_node(t))]);
      }
      placed.per_node.assign(node_os_indices_.size(), copy_into(std::move(buffer)));
      break;
    }
  }
  placed_.emplace(w.data, std::move(placed));
}

const WeightMatrix& WeightPlacement::copy_for_node(const WeightMatrix& w, int node) const {
  const auto it = placed_.find(w.data);
  return it == placed_.end() ? w : it->second.per_node[static_cast<std::size_t>(node)];
}

std::map<int, uint64_t> WeightPlacement::resident_bytes_per_node() const {
  std::map<int, uint64_t> total;
  for (const auto& [data, placed] : placed_)
    for (const NumaBuffer& buffer : placed.buffers)
      for (const auto& [node, bytes] : bytes_per_node(buffer.data(), buffer.size())) total[node] += bytes;
  return total;
}

}  // namespace cpullm
