// A read-only, shared mmap of a whole file. Weights are used in place from this mapping,
// so every process that maps the same model shares the same page-cache pages.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace cpullm {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  std::size_t size() const { return size_; }

 private:
  std::string path_;
  const std::byte* data_ = nullptr;  // (size_) read-only mapping, nullptr for an empty file
  std::size_t size_ = 0;
};

}  // namespace cpullm
