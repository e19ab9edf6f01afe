// The KV cache: for every sequence in flight and every layer, the keys (RoPE applied) and
// values of each position run so far, in F32, F16 or BF16 (--kv-type).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/format/ggml_types.hpp"
#include "engine/util/anonymous_memory.hpp"

namespace cpullm {

enum class KvType { f32, f16, bf16 };
KvType parse_kv_type(const std::string& text);  // "f32", "f16", "bf16"; else an Error
std::string_view kv_type_name(KvType type);
GgmlType kv_element_type(KvType type);
int64_t kv_element_bytes(KvType type);

struct KvCacheShape {
  int64_t sequences = 1;  // sequences in flight, each with its own rows
  int64_t layers = 0;
  int64_t context = 0;    // positions per sequence
  int64_t kv_dim = 0;     // n_kv_heads * head_dim values per position
  KvType type = KvType::f32;
  uint64_t bytes() const;  // keys and values together
};

class KvCache {
 public:
  KvCache() = default;
  explicit KvCache(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  // Rows (context, kv_dim) of one sequence and layer, in the cache's element type.
  const std::byte* keys(int64_t sequence, int64_t layer) const { return keys_.data() + offset(sequence, layer, 0); }
  const std::byte* values(int64_t sequence, int64_t layer) const {
    return values_.data() + offset(sequence, layer, 0);
  }
  // Stores `count` consecutive positions from `position` on: k and v are (count, kv_dim) FP32.
  void store(int64_t sequence, int64_t layer, int64_t position, int64_t count, const float* k, const float* v);

 private:
  std::size_t offset(int64_t sequence, int64_t layer, int64_t position) const;
  // Makes the rows of positions up to `end` of a sequence and layer present, a step ahead.
  void populate_rows(int64_t sequence, int64_t layer, int64_t end);

  KvCacheShape shape_;
  // Pages come as positions run: sized for every sequence's whole context, the cache is resident
  // only as far as they have (a vector was written whole at load: 4 GiB for LLaMA-7B's 4096
  // positions in F32). They are populated at least 2 MiB of rows at a time, in 2 MiB pages where
  // the kernel gives them: a page fault per 4 KiB as rows are first written makes decode up to 6%
  // slower, and 4 KiB pages populated 256 KiB at a time still 2% or more (docs/batching.md).
  AnonymousMemory keys_;           // (sequences, layers, context, kv_dim) elements
  AnonymousMemory values_;         // (sequences, layers, context, kv_dim) elements
  std::vector<int64_t> populated_;  // (sequences, layers) positions whose rows are present
};

}  // namespace cpullm
