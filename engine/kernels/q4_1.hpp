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
#include <cstring>

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

// Four blocks' d and m (FP16, each block's first 4 bytes) as FP32: {d0..d3} and {m0..m3}. One
// conversion for four blocks, so the SIMD kernels keep no scalar work per block.
struct ScalesAndMinimums {
  __m128 d, m;
};
inline ScalesAndMinimums scales_and_minimums(const BlockQ4_1* four) {
  auto head = [&](int j) {
    int32_t bits;
    std::memcpy(&bits, &four[j], sizeof bits);
    return bits;
  };
  const __m256 dm = _mm256_cvtph_ps(_mm_setr_epi32(head(0), head(1), head(2), head(3)));  // d0 m0 d1 m1 ...
  const __m256 split = _mm256_permutevar8x32_ps(dm, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
  return {_mm256_castps256_ps128(split), _mm256_extractf128_ps(split, 1)};
}

// m * s * sum(a) of four blocks from b on, for one token: the minimums' share of the dot product,
// added lane by lane (sum(a) = block_offsets / -8, exact in FP32).
inline __m128 minimum_terms(const ScalesAndMinimums& sm, const QuantizedActivations& a, int64_t b) {
  const __m128 s = _mm_loadu_ps(a.scales + b);
  const __m128 sums = _mm_mul_ps(_mm_cvtepi32_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.block_offsets + b))),
                                 _mm_set1_ps(-0.125f));
  return _mm_mul_ps(_mm_mul_ps(sm.m, s), sums);
}

// The row kernels, one per ISA level (q4_1.cpp, q4_1_avx2.cpp, q4_1_avx512.cpp).
namespace scalar_dot { extern const RowDot q4_1; }
namespace avx2_dot { extern const RowDot q4_1; }
namespace avx512_dot { extern const RowDot q4_1; }

}  // namespace cpullm
