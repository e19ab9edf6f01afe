// GGUF v2/v3 reader. The whole file is mapped once, read-only; metadata strings and tensor
// data are views into that mapping, never copies. Every count, length, dimension and offset
// is checked against the file size and against overflow before it is used, so a truncated or
// hostile file ends in one cpullm::Error naming the file and the problem.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/format/ggml_types.hpp"
#include "engine/util/mapped_file.hpp"

namespace cpullm {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr int kGgmlMaxDims = 4;

enum class GgufValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
std::string_view gguf_value_type_name(GgufValueType type);
// Bytes per element for the fixed-size types, 0 for STRING and ARRAY.
std::size_t gguf_value_type_size(GgufValueType type);

struct GgufValue {
  GgufValueType type = GgufValueType::U8;
  // Scalars, widened: integer types land in `integer` (signed) or `unsigned_integer`.
  int64_t integer = 0;
  uint64_t unsigned_integer = 0;
  double real = 0;
  bool boolean = false;
  std::string_view string;  // STRING: view into the mapping
  // ARRAY
  GgufValueType element_type = GgufValueType::U8;
  uint64_t count = 0;
  std::span<const std::byte> raw;  // (count * element size) elements of a fixed-size type
  std::vector<GgufValue> items;    // (count) elements of STRING or ARRAY type

  bool is_integer() const;
  bool is_array_of(GgufValueType element) const { return type == GgufValueType::ARRAY && element_type == element; }
  // Element i of a fixed-size numeric array, converted.
  double number_at(uint64_t i) const;
  int64_t integer_at(uint64_t i) const;
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  int n_dims = 0;
  std::array<int64_t, kGgmlMaxDims> ne{1, 1, 1, 1};  // ne[0] is the contiguous (row) length
  uint64_t offset = 0;                               // from the start of the data section
  uint64_t bytes = 0;
  const std::byte* data = nullptr;                   // (bytes) inside the mapping

  int64_t elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  std::string shape_string() const;
};

class GgufFile {
 public:
  explicit GgufFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return file_->size(); }
  std::span<const std::byte> bytes() const { return file_->bytes(); }  // the whole mapping
  const MappedFile& mapping() const { return *file_; }

  const std::vector<std::pair<std::string_view, GgufValue>>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufValue* find(std::string_view key) const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;

  // Typed access to metadata; a missing key or a wrong type is an Error naming file and key.
  uint64_t require_uint(std::string_view key) const;
  double require_float(std::string_view key) const;
  std::string_view require_string(std::string_view key) const;
  const GgufValue& require_array(std::string_view key, GgufValueType element) const;
  uint64_t uint_or(std::string_view key, uint64_t fallback) const;
  double float_or(std::string_view key, double fallback) const;
  bool bool_or(std::string_view key, bool fallback) const;
  const GgufTensorInfo& require_tensor(std::string_view name) const;

 private:
  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string_view, GgufValue>> metadata_;
  std::unordered_map<std::string_view, std::size_t> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, std::size_t> tensor_index_;
};

// A short human-readable rendering of a value (arrays abbreviated), for `cpullm info`.
std::string gguf_value_summary(const GgufValue& value, std::size_t max_items = 8);

}  // namespace cpullm
