#include "engine/runtime/numa_memory.hpp"

#include <numa.h>
#include <numaif.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/util/error.hpp"

namespace cpullm {
namespace {

std::size_t page_bytes() { return static_cast<std::size_t>(sysconf(_SC_PAGE_SIZE)); }

// The page holding a range's first byte belongs to that range: so a range starts at the page
// boundary at or after `offset` (offset 0 included) and ends at the one at or after its end.
std::size_t first_page_at_or_after(std::size_t offset) { return (offset + page_bytes() - 1) / page_bytes(); }

}  // namespace

NumaBuffer::NumaBuffer(std::size_t bytes) : memory_(bytes, "placed weights") {}

void NumaBuffer::bind(std::size_t begin, std::size_t end, int node_os_index) {
  set_policy(begin, end, MPOL_BIND, {node_os_index});
}

void NumaBuffer::interleave(const std::vector<int>& node_os_indices) {
  set_policy(0, size(), MPOL_INTERLEAVE, node_os_indices);
}

void NumaBuffer::set_policy(std::size_t begin, std::size_t end, int mode, const std::vector<int>& node_os_indices) {
  if (begin > end || end > size()) fail("NUMA policy range [{}, {}) is outside a buffer of {} bytes", begin, end, size());
  const std::size_t first = first_page_at_or_after(begin), last = first_page_at_or_after(end);
  if (first == last) return;  // no page starts in this range: its bytes live in the previous range's page
  constexpr int kBitsPerWord = 8 * sizeof(unsigned long);
  std::vector<unsigned long> mask(1);
  for (int node : node_os_indices) {
    if (node < 0 || node > numa_max_possible_node()) fail("NUMA node {} does not exist", node);
    mask.resize(std::max(mask.size(), static_cast<std::size_t>(node / kBitsPerWord + 1)));
    mask[static_cast<std::size_t>(node / kBitsPerWord)] |= 1ul << (node % kBitsPerWord);
  }
  // The kernel reads maxnode - 1 bits of the mask (a quirk libnuma also works around).
  const unsigned long maxnode = mask.size() * kBitsPerWord + 1;
  if (mbind(data() + first * page_bytes(), (last - first) * page_bytes(), mode, mask.data(), maxnode,
            MPOL_MF_STRICT | MPOL_MF_MOVE) != 0)
    fail("the kernel refused to place memory on NUMA node(s) {}: mbind: {}", fmt::join(node_os_indices, ","),
         std::strerror(errno));
}

std::map<int, uint64_t> bytes_per_node(const void* data, std::size_t bytes) {
  std::map<int, uint64_t> result;
  if (bytes == 0) return result;
  const uintptr_t start = reinterpret_cast<uintptr_t>(data) / page_bytes() * page_bytes();
  const std::size_t pages = (reinterpret_cast<uintptr_t>(data) + bytes - start + page_bytes() - 1) / page_bytes();
  std::vector<void*> addresses(pages);
  for (std::size_t i = 0; i < pages; ++i) addresses[i] = reinterpret_cast<void*>(start + i * page_bytes());
  std::vector<int> status(pages);
  // No target nodes: move_pages only reports each page's node, or -ENOENT where none is present.
  if (move_pages(0, pages, addresses.data(), nullptr, status.data(), 0) != 0)
    fail("cannot read where pages are (move_pages): {}", std::strerror(errno));
  for (int node : status) result[node >= 0 ? node : -1] += page_bytes();
  return result;
}

std::vector<int> memory_nodes() {
  if (numa_available() < 0) return {0};
  std::vector<int> nodes;
  for (int n = 0; n <= numa_max_node(); ++n)
    if (numa_bitmask_isbitset(numa_all_nodes_ptr, static_cast<unsigned>(n))) nodes.push_back(n);
  return nodes.empty() ? std::vector<int>{0} : nodes;
}

}  // namespace cpullm
