// Streaming GGUF v3 writer. Metadata and tensor infos are declared first; tensor data is then
// streamed in declaration order, in as many pieces as the caller likes, so a model of any size
// is written with memory bounded by the caller's chunk. The file appears at its path only when
// finish() succeeds (util/output_file.hpp).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/format/ggml_types.hpp"
#include "engine/format/gguf.hpp"
#include "engine/util/output_file.hpp"

namespace cpullm {

class GgufWriter {
 public:
  GgufWriter(std::string path, uint32_t alignment = kGgufDefaultAlignment);
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  void add_u32(std::string_view key, uint32_t value);
  void add_f32(std::string_view key, float value);
  void add_bool(std::string_view key, bool value);
  void add_string(std::string_view key, std::string_view value);
  void add_strings(std::string_view key, const std::vector<std::string>& values);
  void add_f32s(std::string_view key, std::span<const float> values);
  void add_i32s(std::string_view key, std::span<const int32_t> values);
  // Any value as the reader returns it, nested arrays included: copies metadata between files.
  void add_value(std::string_view key, const GgufValue& value);

  // ne[0] is the row length, as in ggml. Returns the tensor's size in bytes.
  uint64_t add_tensor(std::string_view name, GgmlType type, std::vector<int64_t> ne);

  // Appends bytes to the current tensor; moves to the next one when it is full.
  void write_data(std::span<const std::byte> bytes);
  // Checks every declared tensor got exactly its bytes, then puts the file in place.
  void finish();

  uint64_t total_tensor_bytes() const { return next_offset_; }

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    uint64_t offset;
    uint64_t bytes;
  };
  void write_header();
  void put(const void* data, std::size_t size);  // through `pending_`
  void flush_pending();
  void put_string(std::string_view s);
  void put_u32(uint32_t v) { put(&v, 4); }
  void put_u64(uint64_t v) { put(&v, 8); }
  void begin_key(std::string_view key, GgufValueType type);
  void pad_to_alignment(uint64_t position);

  std::string path_;
  uint32_t alignment_;
  OutputFile file_;                  // unbuffered: `pending_` is the buffer
  // Bytes not yet written, sent in whole 4 MiB pieces at offsets that are multiples of 4 MiB:
  // written so, the file enters the page cache in 2 MiB folios, which every process mapping it
  // then reads with 2 MiB entries (mapped_file.hpp); with stdio's 4 KiB buffer it stayed in
  // 4 KiB pages.
  std::vector<std::byte> pending_;
  std::vector<std::byte> metadata_;  // serialized key/value pairs, written with the header
  uint64_t metadata_count_ = 0;
  std::vector<PendingTensor> tensors_;
  uint64_t next_offset_ = 0;         // data-section size so far, aligned
  bool header_written_ = false;
  std::size_t current_tensor_ = 0;
  uint64_t current_written_ = 0;     // bytes of the current tensor written
  uint64_t position_ = 0;            // bytes written to the file
};

}  // namespace cpullm
