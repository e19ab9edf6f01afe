// A read-only, shared mmap of a whole file. Weights are used in place from this mapping,
// so every process that maps the same model shares the same page-cache pages.
//
// The mapping asks for transparent huge pages (MADV_HUGEPAGE): pages this process faults in
// from disk then come into the page cache as 2 MiB folios, mapped with 2 MiB entries, as do the
// pages of a file written in large pieces (cpullm's GgufWriter writes 4 MiB at a time). A file
// cached in 4 KiB pages can read at 0.84-0.95 of fresh memory where one in 2 MiB folios reads as
// fast, and decode from it runs up to 13% faster (bench_kernels memory_read_file against
// memory_read; docs/kernels-decode.md, "Page sizes"). Pages already cached in 4 KiB folios stay so.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
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
  // Bytes of the mapping now mapped with 2 MiB entries (FilePmdMapped in /proc/self/smaps);
  // nullopt where smaps cannot be read.
  std::optional<std::size_t> huge_page_bytes() const;

 private:
  std::string path_;
  const std::byte* data_ = nullptr;  // (size_) read-only mapping, nullptr for an empty file
  std::size_t size_ = 0;
};

// Bytes of [data, data + size) now mapped with 2 MiB entries, file-backed or anonymous
// (FilePmdMapped and AnonHugePages of the ranges of /proc/self/smaps it overlaps); nullopt where
// smaps cannot be read.
std::optional<std::size_t> huge_page_bytes(const void* data, std::size_t size);

// "model mapped 97% in 2 MiB pages", for run summaries; says so where it cannot be known.
std::string describe_page_sizes(const MappedFile& file);

}  // namespace cpullm
