// Weight matrices of random values in any runnable format for the kernel benchmarks, in heap
// memory or, as the engine reads a model, in a read-only mapping of a file.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernels/matvec.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/util/anonymous_memory.hpp"
#include "engine/util/mapped_file.hpp"

namespace cpullm::bench {

struct Weights {
  AnonymousMemory storage;  // (rows, row bytes), in 2 MiB pages where granted, as the engine maps its models
  WeightMatrix matrix;
};

inline Weights random_weights(GgmlType type, int64_t rows, int64_t cols) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(rows * cols);
  for (float& v : values) v = dist(rng);
  Weights w;
  w.storage = AnonymousMemory(static_cast<std::size_t>(rows * row_bytes(type, cols)), "benchmark weights");
  w.storage.advise_huge_pages();
  encode_rows(type, values.data(), rows, w.storage.data(), cols);
  w.matrix = {w.storage.data(), type, rows, cols};
  return w;
}

// `copies` copies of `block` end to end in a temporary file (under TMPDIR), mapped as the engine
// maps a GGUF file (engine/util/mapped_file: read-only, shared, huge pages advised), the file
// unlinked at once so that only the mapping keeps it: page-cache pages, what a decode step streams
// its weights from. Written in 4 MiB pieces at 4 MiB offsets, as GgufWriter writes cpullm's models,
// so that the page cache holds it in 2 MiB folios mapped with 2 MiB entries, as it holds those
// models (written 4 KiB at a time, it would stay in 4 KiB pages, which can read up to a fifth
// slower: docs/kernels-decode.md, "Page sizes").
inline std::unique_ptr<MappedFile> file_mapping(std::span<const std::byte> block, int64_t copies) {
  const std::string path = (std::filesystem::temp_directory_path() / "cpullm-bench-weights-XXXXXX").string();
  std::vector<char> name(path.begin(), path.end());
  name.push_back('\0');
  const int fd = mkstemp(name.data());
  if (fd < 0) throw std::runtime_error(path + ": cannot create: " + std::strerror(errno));
  const auto write_all = [&](const std::byte* data, std::size_t size) {
    for (std::size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd, data + done, size - done);
      if (n <= 0) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        ::unlink(name.data());
        throw std::runtime_error(std::string(name.data()) + ": cannot write: " + why);
      }
      done += static_cast<std::size_t>(n);
    }
  };
  constexpr std::size_t kPiece = std::size_t{4} << 20;
  std::vector<std::byte> piece;
  piece.reserve(kPiece);
  for (int64_t c = 0; c < copies; ++c)
    for (std::size_t done = 0; done < block.size();) {
      const std::size_t n = std::min(kPiece - piece.size(), block.size() - done);
      piece.insert(piece.end(), block.begin() + static_cast<std::ptrdiff_t>(done), block.begin() + static_cast<std::ptrdiff_t>(done + n));
      done += n;
      if (piece.size() == kPiece) {
        write_all(piece.data(), piece.size());
        piece.clear();
      }
    }
  write_all(piece.data(), piece.size());
  ::close(fd);
  auto mapping = std::make_unique<MappedFile>(name.data());
  ::unlink(name.data());
  return mapping;
}

}  // namespace cpullm::bench
