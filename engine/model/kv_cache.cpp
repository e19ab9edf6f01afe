#include "engine/model/kv_cache.hpp"

#include <algorithm>

#include "engine/kernels/row_convert.hpp"
#include "engine/util/error.hpp"

namespace cpullm {

KvType parse_kv_type(const std::string& text) {
  for (KvType type : {KvType::f32, KvType::f16, KvType::bf16})
    if (text == kv_type_name(type)) return type;
  fail("KV cache type '{}' is not one of f32, f16, bf16", text);
}

std::string_view kv_type_name(KvType type) {
  switch (type) {
    case KvType::f32: return "f32";
    case KvType::f16: return "f16";
    case KvType::bf16: return "bf16";
  }
  return "?";
}

GgmlType kv_element_type(KvType type) {
  switch (type) {
    case KvType::f32: return GgmlType::F32;
    case KvType::f16: return GgmlType::F16;
    case KvType::bf16: return GgmlType::BF16;
  }
  return GgmlType::F32;
}

int64_t kv_element_bytes(KvType type) { return type == KvType::f32 ? 4 : 2; }

uint64_t KvCacheShape::bytes() const {
  return 2ull * sequences * layers * context * kv_dim * kv_element_bytes(type);
}

KvCache::KvCache(const KvCacheShape& shape)
    : shape_(shape),
      keys_(shape.bytes() / 2, "the KV cache's keys"),
      values_(shape.bytes() / 2, "the KV cache's values"),
      populated_(static_cast<std::size_t>(shape.sequences * shape.layers), 0) {
  keys_.advise_huge_pages();
  values_.advise_huge_pages();
}

void KvCache::populate_rows(int64_t sequence, int64_t layer, int64_t end) {
  int64_t& ready = populated_[static_cast<std::size_t>(sequence * shape_.layers + layer)];
  if (end <= ready) return;
  constexpr int64_t kStepBytes = 2 << 20;
  const int64_t row = shape_.kv_dim * kv_element_bytes(shape_.type);
  const int64_t upto = std::min(shape_.context, std::max(end, ready + (kStepBytes + row - 1) / row));
  for (const AnonymousMemory* memory : {&keys_, &values_})
    memory->populate(offset(sequence, layer, ready), offset(sequence, layer, upto));
  ready = upto;
}

std::size_t KvCache::offset(int64_t sequence, int64_t layer, int64_t position) const {
  const KvCacheShape& s = shape_;
  return static_cast<std::size_t>(((sequence * s.layers + layer) * s.context + position) * s.kv_dim *
                                  kv_element_bytes(s.type));
}

void KvCache::store(int64_t sequence, int64_t layer, int64_t position, int64_t count, const float* k,
                    const float* v) {
  populate_rows(sequence, layer, position + count);
  const GgmlType element = kv_element_type(shape_.type);
  const std::size_t at = offset(sequence, layer, position);
  // The rows of consecutive positions are contiguous: one conversion each for keys and values.
  encode_row(element, k, keys_.data() + at, count * shape_.kv_dim);
  encode_row(element, v, values_.data() + at, count * shape_.kv_dim);
}

}  // namespace cpullm
