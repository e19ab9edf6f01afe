// Zeroed memory that the kernel provides page by page at first touch: an anonymous, private,
// page-aligned mapping. Nothing is written or resident until used, where a std::vector of the
// same size writes every byte at once. For buffers sized for the worst case and filled from the
// front, as the KV cache is for its whole context, and for buffers whose pages must be placed by
// a NUMA policy before they are first written (NumaBuffer).
#pragma once
#include <cstddef>
#include <string_view>

namespace cpullm {

class AnonymousMemory {
 public:
  AnonymousMemory() = default;
  // Error naming `what` when the mapping fails; 0 bytes maps nothing.
  AnonymousMemory(std::size_t bytes, std::string_view what);
  ~AnonymousMemory();
  AnonymousMemory(AnonymousMemory&& other) noexcept;
  AnonymousMemory& operator=(AnonymousMemory&& other) noexcept;
  AnonymousMemory(const AnonymousMemory&) = delete;
  AnonymousMemory& operator=(const AnonymousMemory&) = delete;

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  // Makes the pages of bytes [begin, end) present now, zeroed, in one system call
  // (MADV_POPULATE_WRITE) instead of a page fault at the first write to each page, which can cost
  // a decode step 6% (docs/batching.md). Where the kernel lacks it, the
  // pages come at first write as before.
  void populate(std::size_t begin, std::size_t end) const;
  // Asks for 2 MiB pages (MADV_HUGEPAGE) where whole aligned 2 MiB ranges lie in the mapping:
  // a 512th of the page-table entries to fill. Advice: where refused, 4 KiB pages as before.
  void advise_huge_pages() const;

 private:
  std::byte* data_ = nullptr;  // (size_) page-aligned, zero until written; nullptr when size_ is 0
  std::size_t size_ = 0;       // bytes asked for (the mapping is rounded up to whole pages)
};

}  // namespace cpullm
