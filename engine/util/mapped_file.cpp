#include "engine/util/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "engine/util/error.hpp"

namespace cpullm {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // Refused before open(), which waits for a writer on a FIFO; O_NONBLOCK and the second check
  // cover a FIFO or device swapped in between.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail_file(path, "cannot open: {}", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail_file(path, "not a regular file");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail_file(path, "cannot open: {}", std::strerror(errno));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail_file(path, "not a regular file");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      fail_file(path, "cannot mmap {} bytes: {}", size_, std::strerror(e));
    }
    data_ = static_cast<const std::byte*>(p);
    // Advice only: where the kernel has no transparent huge pages it refuses (EINVAL) and the
    // mapping works as before with 4 KiB pages, which huge_page_bytes() then reports.
    ::madvise(p, size_, MADV_HUGEPAGE);
  }
  ::close(fd);  // the mapping keeps the file alive
}

std::optional<std::size_t> huge_page_bytes(const void* data, std::size_t size) {
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) return std::nullopt;
  const auto begin = reinterpret_cast<uintptr_t>(data), end = begin + size;
  std::size_t total = 0;
  bool inside = false;  // the lines that follow belong to a range overlapping [begin, end)
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t from = 0, to = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &from, &to) == 2) {  // a range header, "from-to perms ..."
      inside = from < end && to > begin;
      continue;
    }
    std::size_t kib = 0;
    if (inside && (std::sscanf(line.c_str(), "FilePmdMapped: %zu kB", &kib) == 1 ||
                   std::sscanf(line.c_str(), "AnonHugePages: %zu kB", &kib) == 1))
      total += kib * 1024;
  }
  return total;
}

std::optional<std::size_t> MappedFile::huge_page_bytes() const {
  if (!data_) return 0;
  return cpullm::huge_page_bytes(data_, size_);
}

std::string describe_page_sizes(const MappedFile& file) {
  const std::optional<std::size_t> huge = file.huge_page_bytes();
  if (!huge) return "model mapping's page sizes unknown (no /proc/self/smaps)";
  const double share = file.size() ? 100.0 * static_cast<double>(*huge) / static_cast<double>(file.size()) : 0.0;
  return fmt::format("model mapped {:.0f}% in 2 MiB pages", share);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace cpullm
