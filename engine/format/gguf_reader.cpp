#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "engine/format/gguf.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// Nested arrays are legal GGUF; a depth limit keeps a hostile file from exhausting the stack.
constexpr int kMaxArrayDepth = 16;
// Counts in the file are checked against its size, but a parsed entry takes several times its
// bytes on disk in memory. These caps, far above any real model (Llama 3 has ~400K vocabulary
// strings and merges, ~300 tensors), bound memory whatever a hostile file claims.
constexpr uint64_t kMaxMetadataEntries = 1u << 16;
constexpr uint64_t kMaxMetadataItems = 1u << 22;  // strings and arrays inside arrays, all keys together
constexpr uint64_t kMaxTensors = 1u << 18;

// Reads little-endian values from the mapping, refusing to step past its end.
class Cursor {
 public:
  Cursor(std::span<const std::byte> bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  uint64_t position() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  std::span<const std::byte> take(uint64_t n, std::string_view what) {
    if (n > remaining())
      fail_file(path_, "truncated: {} needs {} bytes at offset {}, but the file has {} bytes", what, n, pos_,
                bytes_.size());
    auto out = bytes_.subspan(pos_, n);
    pos_ += n;
    return out;
  }

  template <typename T>
  T read(std::string_view what) {
    T value;
    std::memcpy(&value, take(sizeof(T), what).data(), sizeof(T));
    return value;
  }

  std::string_view read_string(std::string_view what) {
    uint64_t length = read<uint64_t>(what);
    if (length > remaining())
      fail_file(path_, "{} at offset {} claims {} bytes, but only {} remain in the file", what, pos_ - 8, length,
                remaining());
    auto bytes = take(length, what);
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
  }

 private:
  std::span<const std::byte> bytes_;
  const std::string& path_;
  uint64_t pos_ = 0;
};

GgufValueType checked_value_type(uint32_t raw, const std::string& path, std::string_view key) {
  if (raw > static_cast<uint32_t>(GgufValueType::F64))
    fail_file(path, "metadata key '{}' has unknown value type {}", key, raw);
  return static_cast<GgufValueType>(raw);
}

GgufValue read_value(Cursor& cursor, GgufValueType type, std::string_view key, int depth, uint64_t& item_budget,
                     const std::string& path) {
  GgufValue value;
  value.type = type;
  switch (type) {
    case GgufValueType::U8: value.unsigned_integer = cursor.read<uint8_t>(key); break;
    case GgufValueType::I8: value.integer = cursor.read<int8_t>(key); break;
    case GgufValueType::U16: value.unsigned_integer = cursor.read<uint16_t>(key); break;
    case GgufValueType::I16: value.integer = cursor.read<int16_t>(key); break;
    case GgufValueType::U32: value.unsigned_integer = cursor.read<uint32_t>(key); break;
    case GgufValueType::I32: value.integer = cursor.read<int32_t>(key); break;
    case GgufValueType::U64: value.unsigned_integer = cursor.read<uint64_t>(key); break;
    case GgufValueType::I64: value.integer = cursor.read<int64_t>(key); break;
    case GgufValueType::F32: value.real = cursor.read<float>(key); break;
    case GgufValueType::F64: value.real = cursor.read<double>(key); break;
    case GgufValueType::BOOL: {
      uint8_t b = cursor.read<uint8_t>(key);
      if (b > 1) fail_file(path, "metadata key '{}' holds bool value {} (must be 0 or 1)", key, b);
      value.boolean = b == 1;
      break;
    }
    case GgufValueType::STRING: value.string = cursor.read_string(key); break;
    case GgufValueType::ARRAY: {
      if (depth >= kMaxArrayDepth) fail_file(path, "metadata key '{}' nests arrays deeper than {}", key, kMaxArrayDepth);
      value.element_type = checked_value_type(cursor.read<uint32_t>(key), path, key);
      value.count = cursor.read<uint64_t>(key);
      std::size_t element_size = gguf_value_type_size(value.element_type);
      // Every element takes at least this many bytes, so a count the file cannot hold is
      // refused before anything is allocated for it.
      std::size_t min_element_bytes = element_size ? element_size : (value.element_type == GgufValueType::STRING ? 8 : 12);
      if (value.count > cursor.remaining() / min_element_bytes)
        fail_file(path, "metadata array '{}' claims {} elements of {}, more than the {} bytes left in the file hold",
                  key, value.count, gguf_value_type_name(value.element_type), cursor.remaining());
      if (element_size) {
        value.raw = cursor.take(value.count * element_size, key);
      } else {
        if (value.count > item_budget)
          fail_file(path, "metadata array '{}' has {} elements; cpullm accepts at most {} strings and arrays in all "
                    "metadata", key, value.count, kMaxMetadataItems);
        item_budget -= value.count;
        value.items.reserve(value.count);
        for (uint64_t i = 0; i < value.count; ++i) {
          // A nested array stores its own element type and count, read by the recursive call.
          value.items.push_back(read_value(cursor, value.element_type, key, depth + 1, item_budget, path));
        }
      }
      break;
    }
  }
  return value;
}

uint64_t align_up(uint64_t offset, uint64_t alignment) { return (offset + alignment - 1) / alignment * alignment; }

}  // namespace

std::string_view gguf_value_type_name(GgufValueType type) {
  static constexpr std::string_view names[] = {"u8",  "i8",  "u16",    "i16",   "u32", "i32", "f32",
                                               "bool", "string", "array", "u64", "i64", "f64"};
  auto index = static_cast<uint32_t>(type);
  return index < std::size(names) ? names[index] : "?";
}

std::size_t gguf_value_type_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::BOOL: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: return 8;
    case GgufValueType::STRING: case GgufValueType::ARRAY: return 0;
  }
  return 0;
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::U16: case GgufValueType::I16:
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::U64: case GgufValueType::I64:
      return true;
    default: return false;
  }
}

template <typename T>
static T load_element(std::span<const std::byte> raw, uint64_t i) {
  T value;
  std::memcpy(&value, raw.data() + i * sizeof(T), sizeof(T));
  return value;
}

double GgufValue::number_at(uint64_t i) const {
  switch (element_type) {
    case GgufValueType::F32: return load_element<float>(raw, i);
    case GgufValueType::F64: return load_element<double>(raw, i);
    default: return static_cast<double>(integer_at(i));
  }
}

int64_t GgufValue::integer_at(uint64_t i) const {
  switch (element_type) {
    case GgufValueType::U8: case GgufValueType::BOOL: return load_element<uint8_t>(raw, i);
    case GgufValueType::I8: return load_element<int8_t>(raw, i);
    case GgufValueType::U16: return load_element<uint16_t>(raw, i);
    case GgufValueType::I16: return load_element<int16_t>(raw, i);
    case GgufValueType::U32: return load_element<uint32_t>(raw, i);
    case GgufValueType::I32: return load_element<int32_t>(raw, i);
    case GgufValueType::U64: return static_cast<int64_t>(load_element<uint64_t>(raw, i));
    case GgufValueType::I64: return load_element<int64_t>(raw, i);
    case GgufValueType::F32: return static_cast<int64_t>(load_element<float>(raw, i));
    case GgufValueType::F64: return static_cast<int64_t>(load_element<double>(raw, i));
    default: return 0;
  }
}

std::string GgufTensorInfo::shape_string() const {
  std::string s = "[";
  for (int d = 0; d < n_dims; ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
  return s + "]";
}

GgufFile::GgufFile(const std::string& path) : file_(std::make_unique<MappedFile>(path)) {
  Cursor cursor(file_->bytes(), path);
  if (file_->size() < 4) fail_file(path, "not a GGUF file: {} bytes is too short for the magic", file_->size());
  uint32_t magic = cursor.read<uint32_t>("magic");
  if (magic != kGgufMagic) fail_file(path, "not a GGUF file: bad magic 0x{:08x} (expected \"GGUF\")", magic);
  version_ = cursor.read<uint32_t>("version");
  if (version_ == 1) fail_file(path, "GGUF version 1 is not supported (versions 2 and 3 are); re-convert the model");
  if (__builtin_bswap32(version_) == 2 || __builtin_bswap32(version_) == 3)
    fail_file(path, "big-endian GGUF files are not supported");
  if (version_ != 2 && version_ != 3) fail_file(path, "unknown GGUF version {} (versions 2 and 3 are supported)", version_);

  uint64_t tensor_count = cursor.read<uint64_t>("tensor count");
  uint64_t kv_count = cursor.read<uint64_t>("metadata count");
  // Smallest possible entries: a key/value is 8 (key length) + 4 (type) + 1 byte; a tensor
  // info is 8 (name length) + 4 (n_dims) + 8 (one dimension) + 4 (type) + 8 (offset).
  if (kv_count > kMaxMetadataEntries)
    fail_file(path, "header claims {} metadata entries; cpullm accepts at most {}", kv_count, kMaxMetadataEntries);
  if (tensor_count > kMaxTensors)
    fail_file(path, "header claims {} tensors; cpullm accepts at most {}", tensor_count, kMaxTensors);
  if (kv_count > cursor.remaining() / 13)
    fail_file(path, "header claims {} metadata entries, more than the file's {} bytes can hold", kv_count, file_->size());
  if (tensor_count > cursor.remaining() / 32)
    fail_file(path, "header claims {} tensors, more than the file's {} bytes can hold", tensor_count, file_->size());

  uint64_t item_budget = kMaxMetadataItems;
  metadata_.reserve(kv_count);
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string_view key = cursor.read_string("metadata key");
    GgufValueType type = checked_value_type(cursor.read<uint32_t>(key), path, key);
    GgufValue value = read_value(cursor, type, key, 0, item_budget, path);
    if (!metadata_index_.emplace(key, metadata_.size()).second) fail_file(path, "duplicate metadata key '{}'", key);
    metadata_.emplace_back(key, std::move(value));
  }

  if (const GgufValue* alignment = find("general.alignment")) {
    if (alignment->type != GgufValueType::U32)
      fail_file(path, "general.alignment has type {} (must be u32)", gguf_value_type_name(alignment->type));
    if (alignment->unsigned_integer == 0 || !std::has_single_bit(alignment->unsigned_integer))
      fail_file(path, "general.alignment is {} (must be a power of two)", alignment->unsigned_integer);
    alignment_ = static_cast<uint32_t>(alignment->unsigned_integer);
  }

  tensors_.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo info;
    info.name = std::string(cursor.read_string("tensor name"));
    uint32_t n_dims = cursor.read<uint32_t>("tensor dimension count");
    if (n_dims < 1 || n_dims > kGgmlMaxDims)
      fail_file(path, "tensor '{}' has {} dimensions (must be 1 to {})", info.name, n_dims, kGgmlMaxDims);
    info.n_dims = static_cast<int>(n_dims);
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t extent = cursor.read<uint64_t>("tensor dimension");
      if (extent == 0 || extent > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail_file(path, "tensor '{}' dimension {} is {} (must be positive)", info.name, d, extent);
      info.ne[d] = static_cast<int64_t>(extent);
      if (__builtin_mul_overflow(elements, info.ne[d], &elements))
        fail_file(path, "tensor '{}' dimensions overflow 64 bits when multiplied", info.name);
    }
    uint32_t raw_type = cursor.read<uint32_t>("tensor type");
    auto traits = ggml_type_traits(raw_type);
    if (!traits) fail_file(path, "tensor '{}' has type {}: {}", info.name, raw_type, ggml_type_rejection(raw_type));
    info.type = static_cast<GgmlType>(raw_type);
    if (info.ne[0] % traits->block_elements != 0)
      fail_file(path, "tensor '{}' of type {} has rows of {} elements, not a multiple of its block size {}", info.name,
                traits->name, info.ne[0], traits->block_elements);
    // rows * (blocks per row * block bytes + per-row extra), every step overflow-checked.
    const uint64_t rows = static_cast<uint64_t>(elements / info.ne[0]);
    if (rows % static_cast<uint64_t>(traits->row_group) != 0)
      fail_file(path, "tensor '{}' of type {} has {} rows, not a multiple of {}", info.name, traits->name, rows,
                traits->row_group);
    const uint64_t blocks_per_row = static_cast<uint64_t>(ggml_stored_blocks(*traits, info.ne[0] / traits->block_elements));
    uint64_t row_bytes = 0;
    if (__builtin_mul_overflow(blocks_per_row, static_cast<uint64_t>(traits->block_bytes), &row_bytes) ||
        __builtin_add_overflow(row_bytes, static_cast<uint64_t>(traits->row_bytes_extra), &row_bytes) ||
        __builtin_mul_overflow(rows, row_bytes, &info.bytes))
      fail_file(path, "tensor '{}' size overflows 64 bits", info.name);
    info.offset = cursor.read<uint64_t>("tensor offset");
    if (info.offset % alignment_ != 0)
      fail_file(path, "tensor '{}' offset {} is not a multiple of the alignment {}", info.name, info.offset, alignment_);
    tensors_.push_back(std::move(info));
  }

  data_offset_ = align_up(cursor.position(), alignment_);
  uint64_t data_size = file_->size() > data_offset_ ? file_->size() - data_offset_ : 0;
  for (auto& info : tensors_) {
    if (info.offset > data_size || info.bytes > data_size - info.offset)
      fail_file(path, "tensor '{}' ({} bytes at data offset {}) lies outside the file (data section holds {} bytes)",
                info.name, info.bytes, info.offset, data_size);
    info.data = file_->bytes().data() + data_offset_ + info.offset;
  }

  for (std::size_t i = 0; i < tensors_.size(); ++i)
    if (!tensor_index_.emplace(tensors_[i].name, i).second)
      fail_file(path, "duplicate tensor name '{}'", tensors_[i].name);

  std::vector<const GgufTensorInfo*> by_offset;
  for (const auto& info : tensors_) by_offset.push_back(&info);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->offset + by_offset[i - 1]->bytes > by_offset[i]->offset)
      fail_file(path, "tensors '{}' and '{}' overlap in the data section", by_offset[i - 1]->name, by_offset[i]->name);
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

uint64_t GgufFile::require_uint(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) fail_file(path(), "missing required metadata key '{}'", key);
  if (!value->is_integer()) fail_file(path(), "metadata key '{}' has type {} (expected an integer)", key, gguf_value_type_name(value->type));
  if (value->integer < 0) fail_file(path(), "metadata key '{}' is negative ({})", key, value->integer);
  return value->integer > 0 ? static_cast<uint64_t>(value->integer) : value->unsigned_integer;
}

double GgufFile::require_float(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) fail_file(path(), "missing required metadata key '{}'", key);
  if (value->type != GgufValueType::F32 && value->type != GgufValueType::F64)
    fail_file(path(), "metadata key '{}' has type {} (expected a float)", key, gguf_value_type_name(value->type));
  return value->real;
}

std::string_view GgufFile::require_string(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) fail_file(path(), "missing required metadata key '{}'", key);
  if (value->type != GgufValueType::STRING)
    fail_file(path(), "metadata key '{}' has type {} (expected a string)", key, gguf_value_type_name(value->type));
  return value->string;
}

const GgufValue& GgufFile::require_array(std::string_view key, GgufValueType element) const {
  const GgufValue* value = find(key);
  if (!value) fail_file(path(), "missing required metadata key '{}'", key);
  if (!value->is_array_of(element))
    fail_file(path(), "metadata key '{}' is not an array of {}", key, gguf_value_type_name(element));
  return *value;
}

uint64_t GgufFile::uint_or(std::string_view key, uint64_t fallback) const {
  return find(key) ? require_uint(key) : fallback;
}

double GgufFile::float_or(std::string_view key, double fallback) const {
  return find(key) ? require_float(key) : fallback;
}

bool GgufFile::bool_or(std::string_view key, bool fallback) const {
  const GgufValue* value = find(key);
  if (!value) return fallback;
  if (value->type != GgufValueType::BOOL) fail_file(path(), "metadata key '{}' has type {} (expected bool)", key, gguf_value_type_name(value->type));
  return value->boolean;
}

const GgufTensorInfo& GgufFile::require_tensor(std::string_view name) const {
  const GgufTensorInfo* info = find_tensor(name);
  if (!info) fail_file(path(), "missing required tensor '{}'", name);
  return *info;
}

std::string gguf_value_summary(const GgufValue& value, std::size_t max_items) {
  switch (value.type) {
    case GgufValueType::STRING: {
      std::string s(value.string.substr(0, 80));
      return "\"" + s + (value.string.size() > 80 ? "...\"" : "\"");
    }
    case GgufValueType::BOOL: return value.boolean ? "true" : "false";
    case GgufValueType::F32: case GgufValueType::F64: return fmt::format("{}", value.real);
    case GgufValueType::ARRAY: {
      std::string s = fmt::format("{}[{}] [", gguf_value_type_name(value.element_type), value.count);
      std::size_t shown = std::min<uint64_t>(value.count, max_items);
      for (std::size_t i = 0; i < shown; ++i) {
        if (i) s += ", ";
        if (!value.items.empty()) s += gguf_value_summary(value.items[i], max_items);
        else if (value.element_type == GgufValueType::F32 || value.element_type == GgufValueType::F64)
          s += fmt::format("{}", value.number_at(i));
        else s += fmt::format("{}", value.integer_at(i));
      }
      return s + (value.count > shown ? ", ...]" : "]");
    }
    default:
      return value.is_integer() && value.integer < 0 ? fmt::format("{}", value.integer)
                                                     : fmt::format("{}", value.integer ? static_cast<uint64_t>(value.integer) : value.unsigned_integer);
  }
}

}  // namespace cpullm
