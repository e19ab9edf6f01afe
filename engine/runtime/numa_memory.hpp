// Memory on chosen NUMA nodes: anonymous mappings whose pages the kernel places by a policy set
// with mbind(2) before they are first written, and the kernel's account of where pages really
// are (move_pages(2) without moving). This is how interleave, replicate and shard are applied:
// the weights are copied out of the file mapping into such buffers. docs/topology.md says why
// copies rather than policies on the file mapping, and what the copies cost.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "engine/util/anonymous_memory.hpp"

namespace cpullm {

// Anonymous memory (AnonymousMemory) with placement policies. Give it a policy (bind,
// interleave) first and write it afterwards: pages are allocated where the policy says at the
// first write.
class NumaBuffer {
 public:
  explicit NumaBuffer(std::size_t bytes);  // Error when the mapping fails; 0 bytes maps nothing

  std::byte* data() const { return memory_.data(); }
  std::size_t size() const { return memory_.size(); }

  // Bytes [begin, end) on node `node_os_index` (MPOL_BIND, strict: the kernel allocates there or
  // fails). A page cut by a boundary goes with its first byte: it belongs to the range holding
  // it. Error for a node the kernel refuses, naming it.
  void bind(std::size_t begin, std::size_t end, int node_os_index);
  // Every page round-robin over the nodes (MPOL_INTERLEAVE, numactl --interleave's policy).
  void interleave(const std::vector<int>& node_os_indices);

 private:
  void set_policy(std::size_t begin, std::size_t end, int mode, const std::vector<int>& node_os_indices);
  AnonymousMemory memory_;  // (bytes asked for) page-aligned
};

// Where the pages of [data, data + bytes) are, as the kernel reports them: bytes per node OS
// index, whole pages (the first and last page counted whole). Pages not present yet count
// under -1. Nothing is moved or touched.
std::map<int, uint64_t> bytes_per_node(const void* data, std::size_t bytes);

// The NUMA nodes this kernel has memory on, by OS index (from libnuma); {0} where NUMA is not
// configured, which is one node.
std::vector<int> memory_nodes();

}  // namespace cpullm
