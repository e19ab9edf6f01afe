// Q4_1, llama.cpp's 4-bit format with a minimum: 32 values per 20-byte block, an FP16 scale d,
// an FP16 minimum m, then 16 bytes whose low nibbles are values 0..15 and high nibbles values
// 16..31;  x = d * q + m, q = 0..15. The quantizer is llama.cpp's quantize_row_q4_1_ref,
// rounding included, so the same FP32 input gives the same bytes.
//
// Its row kernels take Q8_0 activations (dot.hpp), as Q4_0's do. Per block, with the
// activations' scale s and values a:  w.x = s * (d * sum(q * a) + m * sum(a)). sum(q * a) is
// exact in int32 (q unsigned, the unsigned operand of maddubs and vpdpbusd as stored); sum(a)
// comes from the activations' block_offsets (-8 * sum(a)), so nothing else is precomputed.
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "engine/kernels/dot.hpp"
#include "engine/kernels/quant_formats.hpp"
#include "engine/util/half.hpp"

namespace cpullm {

struct BlockQ4_1 {
  uint16_t scale;    // FP16 d
  uint16_t minimum;  // FP16 m
  uint8_t nibbles[kQuantBlock / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// One row of n values (n a multiple of kQuantBlock), as the registry's codecs take it.
void quantize_row_q4_1(const float* x, std::byte* row, int64_t n);
void dequantize_row_q4_1(const std::byte* row, float* out, int64_t n);

// Block b's 32 weights q (0..15) in value order, one per byte: the SIMD kernels' one unpacking
// (AVX2, the baseline; the AVX-512 kernel inlines it as it does int8_rows.hpp's row views).
inline __m256i nibbles_in_order(const BlockQ4_1& block) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.nibbles));
  const __m128i mask = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), mask), _mm_and_si128(packed, mask));
}

// The row kernels, one per ISA level (q4_1.cpp, q4_1_avx2.cpp, q4_1_avx512.cpp).
namespace scalar_dot { extern const RowDot q4_1; }
namespace avx2_dot { extern const RowDot q4_1; }
namespace avx512_dot { extern const RowDot q4_1; }

}  // namespace cpullm
