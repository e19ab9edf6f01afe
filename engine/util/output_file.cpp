#include "engine/util/output_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "engine/util/error.hpp"

namespace cpullm {

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  std::random_device random;
  // A name already taken (by chance or on purpose) is simply passed over: O_EXCL never opens it.
  for (int attempt = 0; attempt < 16 && fd_ < 0; ++attempt) {
    temporary_ = fmt::format("{}.{:08x}{:08x}.partial", path_, random(), random());
    fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST) fail_file(path_, "cannot create: {}", std::strerror(errno));
  }
  if (fd_ < 0) fail_file(path_, "cannot create: every temporary name tried next to it exists");
}

OutputFile::~OutputFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(temporary_.c_str());
}

void OutputFile::write(const void* data, std::size_t size) {
  if (fd_ < 0) fail_file(path_, "written after it was closed");
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_file(path_, "write failed: {}", n < 0 ? std::strerror(errno) : "no progress");
    bytes += n;
    size -= static_cast<std::size_t>(n);
  }
}

void OutputFile::commit() {
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 || ::rename(temporary_.c_str(), path_.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary_.c_str());
    fail_file(path_, "cannot write: {}", std::strerror(error));
  }
}

std::string make_private_temporary_folder(const std::string& prefix) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string folder = fmt::format("{}/{}XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp", prefix);
  std::vector<char> name(folder.begin(), folder.end());
  name.push_back('\0');
  if (!::mkdtemp(name.data())) fail_file(folder, "cannot create a temporary folder: {}", std::strerror(errno));
  return name.data();
}

}  // namespace cpullm
