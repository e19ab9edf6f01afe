// A fuzz input as a file, for code that opens its input by path: an anonymous in-memory file
// (memfd), named /proc/self/fd/N. It is a regular file, so the path takes the same route as a
// model on disk, mmap included.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>

namespace cpullm::fuzz {

class MemoryFile {
 public:
  MemoryFile(const uint8_t* data, std::size_t size) : fd_(memfd_create("fuzz-input", MFD_CLOEXEC)) {
    std::size_t written = 0;
    while (fd_ >= 0 && written < size) {
      const ssize_t n = ::write(fd_, data + written, size - written);
      if (n <= 0) break;
      written += static_cast<std::size_t>(n);
    }
    if (fd_ < 0 || written != size) {  // the harness, not the code under test, failed
      std::perror("fuzz: memfd");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

}  // namespace cpullm::fuzz
