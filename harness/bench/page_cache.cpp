#include "harness/bench/page_cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// An open descriptor that closes itself.
struct FileDescriptor {
  int fd;
  explicit FileDescriptor(const std::string& path) : fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd < 0) fail_file(path, "cannot open: {}", std::strerror(errno));
  }
  ~FileDescriptor() { ::close(fd); }
};

}  // namespace

double cached_fraction(const std::string& path) {
  FileDescriptor file(path);
  struct stat st {};
  if (::fstat(file.fd, &st) != 0 || st.st_size == 0) return 0;
  const std::size_t size = static_cast<std::size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, file.fd, 0);
  if (map == MAP_FAILED) fail_file(path, "cannot mmap to count cached pages: {}", std::strerror(errno));
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGE_SIZE));
  std::vector<unsigned char> resident((size + page - 1) / page);
  const int status = ::mincore(map, size, resident.data());
  ::munmap(map, size);
  if (status != 0) fail_file(path, "mincore failed: {}", std::strerror(errno));
  std::size_t cached = 0;
  for (unsigned char r : resident) cached += r & 1;
  return static_cast<double>(cached) / resident.size();
}

double drop_from_page_cache(const std::string& path) {
  {
    FileDescriptor file(path);
    ::fdatasync(file.fd);  // dirty pages (a model just written) cannot be dropped
    if (::posix_fadvise(file.fd, 0, 0, POSIX_FADV_DONTNEED) != 0)
      fail_file(path, "posix_fadvise(DONTNEED) failed: the page cache cannot be dropped here");
  }
  return cached_fraction(path);
}

}  // namespace cpullm
