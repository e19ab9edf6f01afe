#include "engine/util/anonymous_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "engine/util/error.hpp"

namespace cpullm {

AnonymousMemory::AnonymousMemory(std::size_t bytes, std::string_view what) : size_(bytes) {
  if (bytes == 0) return;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail("cannot map {} bytes of anonymous memory for {}: {}", bytes, what, std::strerror(errno));
  data_ = static_cast<std::byte*>(p);
}

void AnonymousMemory::populate(std::size_t begin, std::size_t end) const {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  begin = begin / page * page;
  end = std::min((end + page - 1) / page * page, (size_ + page - 1) / page * page);
#ifdef MADV_POPULATE_WRITE  // Linux 5.14; built against older headers, the pages come at first write
  if (data_ && begin < end) madvise(data_ + begin, end - begin, MADV_POPULATE_WRITE);  // failure is harmless
#endif
}

void AnonymousMemory::advise_huge_pages() const {
  if (data_) madvise(data_, size_, MADV_HUGEPAGE);
}

AnonymousMemory::~AnonymousMemory() {
  if (data_) munmap(data_, size_);
}

AnonymousMemory::AnonymousMemory(AnonymousMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

AnonymousMemory& AnonymousMemory::operator=(AnonymousMemory&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  return *this;
}

}  // namespace cpullm
