#include "engine/util/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/util/error.hpp"

namespace cpullm {

std::string read_input_file(const std::string& path, std::string_view what, std::uintmax_t max_bytes) {
  // Checked before open(), which waits for a writer on a FIFO; O_NONBLOCK and fstat() cover a
  // FIFO or device swapped in between.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail_file(path, "cannot open {}: {}", what, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail_file(path, "not a regular file ({})", what);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail_file(path, "cannot open {}: {}", what, std::strerror(errno));
  std::string text;
  try {
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) fail_file(path, "not a regular file ({})", what);
    const auto size = static_cast<std::uintmax_t>(st.st_size);
    if (size > max_bytes) fail_file(path, "{} of {} bytes: at most {} are read", what, size, max_bytes);
    text.resize(size);
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail_file(path, "cannot read {}: {}", what, std::strerror(errno));
      if (n == 0) break;  // shrank while being read: what was there is what is read
      done += static_cast<std::size_t>(n);
    }
    text.resize(done);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return text;
}

}  // namespace cpullm
