// The KV cache: for every sequence in flight and every layer, the keys (RoPE applied) and
// values of each position run so far, in F32, F16, BF16 or Q8_0 (--kv-type). Each KV head's
// positions lie together, (kv_heads, context, head_dim) per sequence and layer: a unit of decode
// attention (a KV head over a run of positions) then streams consecutive bytes. With whole
// positions as rows, a head's rows lay a position's width apart (8 KiB on LLaMA-7B in F16), a
// page per row, where the hardware prefetchers do not follow: decode attention at depth 8,192 read
// at 12 GB/s instead of 19 (docs/attention.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/format/ggml_types.hpp"
#include "engine/kernels/attention.hpp"
#include "engine/util/anonymous_memory.hpp"

namespace cpullm {

// The types a cache can hold, in kv_types()' order: this list is the one the flags, the results
// and the Python tools (`cpullm info --formats --json`) read.
enum class KvType { f32, f16, bf16, q8_0 };
struct KvTypeInfo {
  KvType type;
  std::string_view name;  // as --kv-type takes it
  GgmlType element;       // the rows' ggml type: Q8_0 rows are llama.cpp's blocks of 32 (-ctk/-ctv q8_0)
};
inline constexpr KvTypeInfo kKvTypes[] = {
    {KvType::f32, "f32", GgmlType::F32},
    {KvType::f16, "f16", GgmlType::F16},
    {KvType::bf16, "bf16", GgmlType::BF16},
    {KvType::q8_0, "q8_0", GgmlType::Q8_0},
};
inline std::span<const KvTypeInfo> kv_types() { return kKvTypes; }
constexpr const KvTypeInfo& kv_type_info(KvType type) {
  for (const KvTypeInfo& t : kKvTypes)
    if (t.type == type) return t;
  return kKvTypes[0];  // unreachable: every KvType has its entry
}
constexpr std::string_view kv_type_name(KvType type) { return kv_type_info(type).name; }
constexpr GgmlType kv_element_type(KvType type) { return kv_type_info(type).element; }
// What every command's cache holds unless --kv-type says otherwise: F16, as llama.cpp's. It costs
// no accuracy that eval-quant can measure (mean KL 1.7e-5 from F32 at 2,048 positions of
// stories260K) and is faster to attend over than F32 at every depth (docs/batching.md).
inline constexpr KvType kDefaultKvType = KvType::f16;
std::vector<std::string> kv_type_names();       // f32, f16, bf16, q8_0
KvType parse_kv_type(const std::string& text);  // a name of kv_types(); else an Error
double kv_value_bytes(KvType type);             // bytes per cached value, block scales included (Q8_0: 34 / 32)
// Whether a cache of this type can hold rows of head_dim values per head; else why not.
std::string kv_type_refusal(KvType type, int64_t head_dim);

struct KvCacheShape {
  int64_t sequences = 1;  // sequences in flight, each with its own rows
  int64_t layers = 0;
  int64_t context = 0;    // positions per sequence
  int64_t kv_dim = 0;     // n_kv_heads * head_dim values per position
  int64_t kv_heads = 1;   // heads kv_dim splits into
  KvType type = KvType::f32;
  int64_t row_bytes() const;   // one position's keys (or values), all heads
  int64_t head_bytes() const;  // one position's keys (or values) of one head
  uint64_t bytes() const;     // keys and values together
};

class KvCache {
 public:
  KvCache() = default;
  explicit KvCache(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  // Rows (kv_heads, context, head_dim) of one sequence and layer, in the cache's element type.
  const std::byte* keys(int64_t sequence, int64_t layer) const { return keys_.data() + offset(sequence, layer, 0, 0); }
  const std::byte* values(int64_t sequence, int64_t layer) const {
    return values_.data() + offset(sequence, layer, 0, 0);
  }
  KvStrides strides() const { return {shape_.head_bytes(), shape_.context * shape_.head_bytes()}; }
  // Stores `count` consecutive positions from `position` on: k and v are (count, kv_dim) FP32.
  void store(int64_t sequence, int64_t layer, int64_t position, int64_t count, const float* k, const float* v);

 private:
  std::size_t offset(int64_t sequence, int64_t layer, int64_t head, int64_t position) const;
  // Makes the rows of positions up to `end` of a sequence and layer present, a step ahead.
  void populate_rows(int64_t sequence, int64_t layer, int64_t end);

  KvCacheShape shape_;
  // Pages come as positions run: sized for every sequence's whole context, the cache is resident
  // only as far as they have (in each head's rows) (a vector was written whole at load: 4 GiB for LLaMA-7B's 4096
  // positions in F32). They are populated at least 2 MiB of rows at a time, in 2 MiB pages where
  // the kernel gives them: a page fault per 4 KiB as rows are first written makes decode up to 6%
  // slower, and 4 KiB pages populated 256 KiB at a time still 2% or more (docs/batching.md).
  AnonymousMemory keys_;           // (sequences, layers, kv_heads, context, head_dim) elements
  AnonymousMemory values_;         // (sequences, layers, kv_heads, context, head_dim) elements
  std::vector<int64_t> populated_;  // (sequences, layers) positions whose rows are present
};

}  // namespace cpullm
