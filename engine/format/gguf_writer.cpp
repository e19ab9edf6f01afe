#include "engine/format/gguf_writer.hpp"

#include <algorithm>

#include "engine/util/error.hpp"

namespace cpullm {

constexpr std::size_t kWritePiece = std::size_t{4} << 20;  // see GgufWriter::pending_

// Metadata values are appended to metadata_ through these small helpers.
namespace {
template <typename T>
void append_pod(std::vector<std::byte>& out, const T& value) {
  auto* b = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), b, b + sizeof(T));
}
void append_string(std::vector<std::byte>& out, std::string_view s) {
  append_pod<uint64_t>(out, s.size());
  auto* b = reinterpret_cast<const std::byte*>(s.data());
  out.insert(out.end(), b, b + s.size());
}
template <typename T>
void append_array(std::vector<std::byte>& out, GgufValueType element, std::span<const T> values) {
  append_pod<uint32_t>(out, static_cast<uint32_t>(element));
  append_pod<uint64_t>(out, values.size());
  for (const T& v : values) append_pod(out, v);
}
// What GGUF stores after a value's type tag; an array's items recurse. Fixed-size arrays hold
// their elements' bytes in `raw`, string and array arrays one GgufValue each in `items`.
void append_value(std::vector<std::byte>& out, const GgufValue& value, std::string_view key, const std::string& path) {
  switch (value.type) {
    case GgufValueType::U8: append_pod(out, static_cast<uint8_t>(value.unsigned_integer)); break;
    case GgufValueType::I8: append_pod(out, static_cast<int8_t>(value.integer)); break;
    case GgufValueType::U16: append_pod(out, static_cast<uint16_t>(value.unsigned_integer)); break;
    case GgufValueType::I16: append_pod(out, static_cast<int16_t>(value.integer)); break;
    case GgufValueType::U32: append_pod(out, static_cast<uint32_t>(value.unsigned_integer)); break;
    case GgufValueType::I32: append_pod(out, static_cast<int32_t>(value.integer)); break;
    case GgufValueType::U64: append_pod(out, value.unsigned_integer); break;
    case GgufValueType::I64: append_pod(out, value.integer); break;
    case GgufValueType::F32: append_pod(out, static_cast<float>(value.real)); break;
    case GgufValueType::F64: append_pod(out, value.real); break;
    case GgufValueType::BOOL: append_pod<uint8_t>(out, value.boolean ? 1 : 0); break;
    case GgufValueType::STRING: append_string(out, value.string); break;
    case GgufValueType::ARRAY: {
      const std::size_t element_size = gguf_value_type_size(value.element_type);
      if (element_size ? value.raw.size() != value.count * element_size : value.items.size() != value.count)
        fail_file(path, "metadata '{}': array declares {} elements but holds {} bytes and {} items", key, value.count,
                  value.raw.size(), value.items.size());
      append_pod(out, static_cast<uint32_t>(value.element_type));
      append_pod(out, value.count);
      out.insert(out.end(), value.raw.begin(), value.raw.end());
      for (const GgufValue& item : value.items) {
        if (item.type != value.element_type)
          fail_file(path, "metadata '{}': array of {} holds a {}", key, gguf_value_type_name(value.element_type),
                    gguf_value_type_name(item.type));
        append_value(out, item, key, path);
      }
      break;
    }
  }
}
}  // namespace

GgufWriter::GgufWriter(std::string path, uint32_t alignment)
    : path_(std::move(path)), alignment_(alignment), file_(path_) {
  pending_.reserve(kWritePiece);
  if (alignment_ != kGgufDefaultAlignment) add_u32("general.alignment", alignment_);
}

void GgufWriter::put(const void* data, std::size_t size) {
  const auto* bytes = static_cast<const std::byte*>(data);
  position_ += size;
  while (size > 0) {
    const std::size_t n = std::min(size, kWritePiece - pending_.size());
    pending_.insert(pending_.end(), bytes, bytes + n);
    bytes += n;
    size -= n;
    if (pending_.size() == kWritePiece) flush_pending();
  }
}

void GgufWriter::flush_pending() {
  file_.write(pending_.data(), pending_.size());
  pending_.clear();
}

void GgufWriter::put_string(std::string_view s) {
  put_u64(s.size());
  put(s.data(), s.size());
}

void GgufWriter::begin_key(std::string_view key, GgufValueType type) {
  if (header_written_) fail_file(path_, "metadata '{}' added after tensor data started", key);
  append_string(metadata_, key);
  append_pod<uint32_t>(metadata_, static_cast<uint32_t>(type));
  ++metadata_count_;
}


void GgufWriter::add_u32(std::string_view key, uint32_t value) {
  begin_key(key, GgufValueType::U32);
  append_pod(metadata_, value);
}
void GgufWriter::add_f32(std::string_view key, float value) {
  begin_key(key, GgufValueType::F32);
  append_pod(metadata_, value);
}
void GgufWriter::add_bool(std::string_view key, bool value) {
  begin_key(key, GgufValueType::BOOL);
  append_pod<uint8_t>(metadata_, value ? 1 : 0);
}
void GgufWriter::add_string(std::string_view key, std::string_view value) {
  begin_key(key, GgufValueType::STRING);
  append_string(metadata_, value);
}
void GgufWriter::add_strings(std::string_view key, const std::vector<std::string>& values) {
  begin_key(key, GgufValueType::ARRAY);
  append_pod<uint32_t>(metadata_, static_cast<uint32_t>(GgufValueType::STRING));
  append_pod<uint64_t>(metadata_, values.size());
  for (const auto& v : values) append_string(metadata_, v);
}
void GgufWriter::add_f32s(std::string_view key, std::span<const float> values) {
  begin_key(key, GgufValueType::ARRAY);
  append_array(metadata_, GgufValueType::F32, values);
}
void GgufWriter::add_i32s(std::string_view key, std::span<const int32_t> values) {
  begin_key(key, GgufValueType::ARRAY);
  append_array(metadata_, GgufValueType::I32, values);
}

void GgufWriter::add_value(std::string_view key, const GgufValue& value) {
  begin_key(key, value.type);
  append_value(metadata_, value, key, path_);
}

uint64_t GgufWriter::add_tensor(std::string_view name, GgmlType type, std::vector<int64_t> ne) {
  if (header_written_) fail_file(path_, "tensor '{}' declared after tensor data started", name);
  auto traits = ggml_type_traits(static_cast<uint32_t>(type));
  if (!traits || ne.empty() || ne.size() > kGgmlMaxDims) fail_file(path_, "tensor '{}': bad type or rank", name);
  int64_t elements = 1;
  for (int64_t extent : ne) elements *= extent;
  if (ne[0] % traits->block_elements != 0)
    fail_file(path_, "tensor '{}': row length {} is not a multiple of {}'s block size {}", name, ne[0], traits->name,
              traits->block_elements);
  const uint64_t bytes = static_cast<uint64_t>(elements / ne[0] * ggml_row_bytes(*traits, ne[0]));
  tensors_.push_back({std::string(name), type, std::move(ne), next_offset_, bytes});
  next_offset_ = (next_offset_ + bytes + alignment_ - 1) / alignment_ * alignment_;
  return bytes;
}

void GgufWriter::pad_to_alignment(uint64_t position) {
  static constexpr std::byte zeros[256] = {};
  uint64_t padding = (alignment_ - position % alignment_) % alignment_;
  while (padding > 0) {
    std::size_t n = std::min<uint64_t>(padding, sizeof(zeros));
    put(zeros, n);
    padding -= n;
  }
}

void GgufWriter::write_header() {
  put_u32(kGgufMagic);
  put_u32(3);
  put_u64(tensors_.size());
  put_u64(metadata_count_);
  put(metadata_.data(), metadata_.size());
  for (const auto& t : tensors_) {
    put_string(t.name);
    put_u32(static_cast<uint32_t>(t.ne.size()));
    for (int64_t extent : t.ne) put_u64(static_cast<uint64_t>(extent));
    put_u32(static_cast<uint32_t>(t.type));
    put_u64(t.offset);
  }
  pad_to_alignment(position_);
  header_written_ = true;
}

void GgufWriter::write_data(std::span<const std::byte> bytes) {
  if (!header_written_) write_header();
  while (!bytes.empty()) {
    if (current_tensor_ >= tensors_.size()) fail_file(path_, "more tensor data written than declared");
    const PendingTensor& t = tensors_[current_tensor_];
    uint64_t n = std::min<uint64_t>(bytes.size(), t.bytes - current_written_);
    put(bytes.data(), n);
    bytes = bytes.subspan(n);
    current_written_ += n;
    if (current_written_ == t.bytes) {
      pad_to_alignment(position_);
      ++current_tensor_;
      current_written_ = 0;
    }
  }
}

void GgufWriter::finish() {
  if (!header_written_) write_header();
  if (current_tensor_ != tensors_.size())
    fail_file(path_, "tensor '{}' got {} of its {} bytes", tensors_[current_tensor_].name, current_written_,
              tensors_[current_tensor_].bytes);
  flush_pending();
  file_.commit();
}

}  // namespace cpullm
