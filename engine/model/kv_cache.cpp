#include "engine/model/kv_cache.hpp"

#include <algorithm>

#include "engine/kernels/row_convert.hpp"
#include "engine/util/error.hpp"

#include <fmt/ranges.h>

namespace cpullm {

namespace {
int64_t block_elements(KvType type) { return ggml_type_traits(static_cast<uint32_t>(kv_element_type(type)))->block_elements; }
}  // namespace

std::vector<std::string> kv_type_names() {
  std::vector<std::string> names;
  for (const KvTypeInfo& t : kKvTypes) names.emplace_back(t.name);
  return names;
}

KvType parse_kv_type(const std::string& text) {
  for (const KvTypeInfo& t : kKvTypes)
    if (text == t.name) return t.type;
  fail("KV cache type '{}' is not one of {}", text, fmt::join(kv_type_names(), ", "));
}

double kv_value_bytes(KvType type) {
  const int64_t block = block_elements(type);
  return static_cast<double>(row_bytes(kv_element_type(type), block)) / static_cast<double>(block);
}

std::string kv_type_refusal(KvType type, int64_t head_dim) {
  const int64_t block = block_elements(type);
  if (head_dim % block == 0) return "";
  return fmt::format("a {} KV cache stores each head in blocks of {} values, and this model's heads have {}",
                     kv_type_name(type), block, head_dim);
}

int64_t KvCacheShape::row_bytes() const { return cpullm::row_bytes(kv_element_type(type), kv_dim); }
int64_t KvCacheShape::head_bytes() const { return cpullm::row_bytes(kv_element_type(type), kv_dim / kv_heads); }

uint64_t KvCacheShape::bytes() const { return 2ull * sequences * layers * context * row_bytes(); }

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
  const int64_t row = shape_.row_bytes();
  const int64_t upto = std::min(shape_.context, std::max(end, ready + (kStepBytes + row - 1) / row));
  for (const AnonymousMemory* memory : {&keys_, &values_})
    for (int64_t head = 0; head < shape_.kv_heads; ++head)
      memory->populate(offset(sequence, layer, head, ready), offset(sequence, layer, head, upto));
  ready = upto;
}

std::size_t KvCache::offset(int64_t sequence, int64_t layer, int64_t head, int64_t position) const {
  const KvCacheShape& s = shape_;
  return static_cast<std::size_t>((((sequence * s.layers + layer) * s.kv_heads + head) * s.context + position) * s.head_bytes());
}

void KvCache::store(int64_t sequence, int64_t layer, int64_t position, int64_t count, const float* k,
                    const float* v) {
  populate_rows(sequence, layer, position + count);
  const GgmlType element = kv_element_type(shape_.type);
  const int64_t head_dim = shape_.kv_dim / shape_.kv_heads;
  for (int64_t t = 0; t < count; ++t)
    for (int64_t head = 0; head < shape_.kv_heads; ++head) {
      const std::size_t at = offset(sequence, layer, head, position + t);
      const int64_t from = t * shape_.kv_dim + head * head_dim;
      encode_row(element, k + from, keys_.data() + at, head_dim);
      encode_row(element, v + from, values_.data() + at, head_dim);
    }
}

}  // namespace cpullm
