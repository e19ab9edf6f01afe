// Decode attention's two row kernels, at each ISA level and for each KV cache type: the scores
// of the query heads that read one KV head against a run of its key rows, and their outputs' sums
// of probabilities times value rows. They
// read the cache's rows where they lie, each value widened to FP32 in registers (F16 through F16C,
// BF16 by a shift, Q8_0 by widening its int8 values and applying the block's scale), never into a
// buffer first: widening every 64-row tile into FP32 made the half-size F16 cache slower than F32
// (docs/attention.md). attention.cpp splits the work and runs the softmax; the scalar level is the
// reference the others are checked against (tests/unit/test_attention.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/format/ggml_types.hpp"
#include "engine/kernels/dot.hpp"
#include "engine/kernels/isa.hpp"
#include "engine/kernels/quant_formats.hpp"

namespace cpullm {

// Both take the query heads that read one KV head together (grouped-query attention: TinyLlama
// and Llama 3 have 8 or 4 a KV head), so each cache value is widened once for all of them.
struct AttentionRowKernels {
  // scores[h * scores_stride + j] = scale * (q_h . row j) for h < heads, j < n: q_h at
  // q + h * head_dim, row j at rows + j * stride bytes.
  void (*score)(float* scores, int64_t scores_stride, const float* q, int64_t heads, const std::byte* rows,
                int64_t stride, int64_t n, int64_t head_dim, float scale);
  // out_h (head_dim, at out + h * out_stride) += sum over k < n of coefficients_h[k] * row k, for
  // h < heads: coefficients_h at coefficients + h * coefficients_stride.
  void (*accumulate)(float* out, int64_t out_stride, const float* coefficients, int64_t coefficients_stride,
                     int64_t heads, const std::byte* rows, int64_t stride, int64_t n, int64_t head_dim);
};

// One level's kernels for each cache type.
struct AttentionRowTable {
  AttentionRowKernels f32, f16, bf16, q8_0;
};
// Each level's table, defined in attention_rows_scalar.cpp, attention_rows_avx2.cpp and
// attention_rows_avx512.cpp; AVX-512's only where cpu_supports(Isa::Avx512).
const AttentionRowTable& scalar_attention_rows();
const AttentionRowTable& avx2_attention_rows();
const AttentionRowTable& avx512_attention_rows();
// The kernels of `isa` for a cache of kv_type (F32, F16, BF16 or Q8_0); an Error for a level
// this CPU cannot run or another type.
const AttentionRowKernels& attention_row_kernels(Isa isa, GgmlType kv_type);

// A Q8_0 row is llama.cpp's blocks of 32 int8 values, each block after its FP16 scale; a head
// (head_dim a multiple of 32, which attention() requires) is whole blocks, so its row slices start
// at a block. Column c of a row of type V starts column_offset<V>(c) bytes in; Q8_0's values are
// multiplied by their block's scale (the float types have none).
template <GgmlType V>
inline constexpr bool kBlockScaled = V == GgmlType::Q8_0;
template <GgmlType V>
inline int64_t column_offset(int64_t c) {
  if constexpr (kBlockScaled<V>)
    return c / kQuantBlock * int64_t{sizeof(BlockQ8_0)} + 2 + c % kQuantBlock;
  else
    return c * kValueBytes<V>;
}
inline float q8_0_scale(const std::byte* row, int64_t c) {
  return load_f16(row + c / kQuantBlock * int64_t{sizeof(BlockQ8_0)});
}
template <GgmlType V>
inline float value_at(const std::byte* row, int64_t c) {
  if constexpr (kBlockScaled<V>)
    return q8_0_scale(row, c) * static_cast<float>(static_cast<int8_t>(row[column_offset<V>(c)]));
  else
    return load_value<V>(row + c * kValueBytes<V>);
}

// A level's table, from its template over the cache type.
template <template <GgmlType> class Rows>
AttentionRowTable attention_rows_of() {
  return {{Rows<GgmlType::F32>::score, Rows<GgmlType::F32>::accumulate},
          {Rows<GgmlType::F16>::score, Rows<GgmlType::F16>::accumulate},
          {Rows<GgmlType::BF16>::score, Rows<GgmlType::BF16>::accumulate},
          {Rows<GgmlType::Q8_0>::score, Rows<GgmlType::Q8_0>::accumulate}};
}

}  // namespace cpullm
