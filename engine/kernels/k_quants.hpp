// llama.cpp's K-quants, in its exact byte layouts: super-blocks of 256 values split into
// sub-blocks of 16 or 32, each sub-block with a small integer scale (and, for the affine types, a
// minimum) that multiplies the super-block's FP16 scale.
//   Q2_K: 16 sub-blocks of 16, x = d * sc * q - dmin * m, q = 0..3, sc and m 4 bits;   84 bytes
//   Q3_K: 16 sub-blocks of 16, x = d * (sc - 32) * (q - 4), q = 0..7, sc 6 bits;       110 bytes
//   Q4_K:  8 sub-blocks of 32, x = d * sc * q - dmin * m, q = 0..15, sc and m 6 bits;  144 bytes
//   Q5_K:  8 sub-blocks of 32, x = d * sc * q - dmin * m, q = 0..31, sc and m 6 bits;  176 bytes
//   Q6_K: 16 sub-blocks of 16, x = d * sc * (q - 32), q = 0..63, sc int8;             210 bytes
// The quantizers are llama.cpp's reference ones (quantize_row_q*_K_ref), rounding and search
// included, so the same FP32 input gives the same bytes; the dequantizers are its
// dequantize_row_q*_K.
//
// Their row kernels take Q8_0 activations (dot.hpp), as every integer format here does: a 32-value
// activation block covers one Q4_K/Q5_K sub-block or two 16-value ones, so each kernel sums
// exact int32 products per sub-block and scales them by the activation block's own scale.
// (llama.cpp quantizes activations to Q8_K, one scale per 256; Q8_0's per-32 scales are at
// least as accurate and keep one activation path for every format.)
#pragma once
#include <cstddef>
#include <cstdint>
#include <immintrin.h>

#include "engine/kernels/dot.hpp"

namespace cpullm {

inline constexpr int64_t kSuperBlock = 256;  // values per K-quant block (llama.cpp's QK_K)
inline constexpr int kPackedScales = 12;     // Q3_K/Q4_K/Q5_K: 6-bit scales (and minimums) packed in 12 bytes

struct BlockQ2_K {
  uint8_t scales[kSuperBlock / 16];  // (16) sub-block j: scale in the low nibble, minimum in the high one
  uint8_t qs[kSuperBlock / 4];       // (64) 2-bit values, 4 per byte
  uint16_t d;                        // FP16 scale of the scales
  uint16_t dmin;                     // FP16 scale of the minimums
};
static_assert(sizeof(BlockQ2_K) == 84);

struct BlockQ3_K {
  uint8_t hmask[kSuperBlock / 8];  // (32) each value's third bit
  uint8_t qs[kSuperBlock / 4];     // (64) each value's low 2 bits, 4 per byte
  uint8_t scales[kPackedScales];   // (16 six-bit scales, stored + 32)
  uint16_t d;                      // FP16 scale of the scales
};
static_assert(sizeof(BlockQ3_K) == 110);

struct BlockQ4_K {
  uint16_t d;                      // FP16 scale of the scales
  uint16_t dmin;                   // FP16 scale of the minimums
  uint8_t scales[kPackedScales];   // (8 six-bit scales and 8 six-bit minimums)
  uint8_t qs[kSuperBlock / 2];     // (128) 4-bit values: 64 values per 32 bytes, low nibbles first
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ5_K {
  uint16_t d;                      // FP16 scale of the scales
  uint16_t dmin;                   // FP16 scale of the minimums
  uint8_t scales[kPackedScales];   // (8 six-bit scales and 8 six-bit minimums)
  uint8_t qh[kSuperBlock / 8];     // (32) each value's fifth bit
  uint8_t qs[kSuperBlock / 2];     // (128) low 4 bits, as Q4_K's
};
static_assert(sizeof(BlockQ5_K) == 176);

struct BlockQ6_K {
  uint8_t ql[kSuperBlock / 2];     // (128) low 4 bits
  uint8_t qh[kSuperBlock / 4];     // (64) high 2 bits
  int8_t scales[kSuperBlock / 16]; // (16) one per 16 values
  uint16_t d;                      // FP16 scale of the scales
};
static_assert(sizeof(BlockQ6_K) == 210);

// Sub-block j's (0..7) 6-bit scale and minimum from Q4_K's and Q5_K's packed 12 bytes
// (llama.cpp's get_scale_min_k4): scales 0..3 and minimums 0..3 are bytes 0..7's low 6 bits;
// 4..7 take their low 4 bits from bytes 8..11 and their top 2 from bytes 0..7's top bits.
inline void scale_min_k4(int j, const uint8_t* packed, uint8_t* scale, uint8_t* minimum) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *minimum = packed[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4));
    *minimum = static_cast<uint8_t>((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
  }
}

// All 8 at once, as scale_min_k4 gives them one by one, for the SIMD kernels (baseline AVX2,
// so the AVX-512 file includes it before its target pragma): scale j in byte j, minimum j in
// byte 8 + j. The 16-byte load reads 4 bytes of the block past the 12 (its qh or qs). In SIMD
// registers: at AVX-512 Q4_K read 3-7% more bytes/s in cache (one thread) than with the unpacking in
// general-purpose registers.
inline __m128i scales_and_minimums_k4(const uint8_t* packed) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
  const __m128i low = _mm_and_si128(v, _mm_set1_epi8(0x3f));
  const __m128i tops = _mm_and_si128(_mm_srli_epi32(v, 6), _mm_set1_epi8(3));
  const __m128i nibbles = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(v, 0xaa), _mm_setr_epi32(0, 4, 0, 0)), _mm_set1_epi8(0x0f));
  return _mm_unpacklo_epi32(low, _mm_or_si128(nibbles, _mm_slli_epi32(tops, 4)));
}

// Q3_K's 16 scales, unpacked from 12 bytes and with their +32 bias removed (-32..31).
void q3_k_scales(const uint8_t packed[kPackedScales], int8_t out[16]);

// One row of n values (n a multiple of kSuperBlock), as the registry's codecs take it.
void quantize_row_q2_k(const float* x, std::byte* row, int64_t n);
void quantize_row_q3_k(const float* x, std::byte* row, int64_t n);
void quantize_row_q4_k(const float* x, std::byte* row, int64_t n);
void quantize_row_q5_k(const float* x, std::byte* row, int64_t n);
void quantize_row_q6_k(const float* x, std::byte* row, int64_t n);
void dequantize_row_q2_k(const std::byte* row, float* out, int64_t n);
void dequantize_row_q3_k(const std::byte* row, float* out, int64_t n);
void dequantize_row_q4_k(const std::byte* row, float* out, int64_t n);
void dequantize_row_q5_k(const std::byte* row, float* out, int64_t n);
void dequantize_row_q6_k(const std::byte* row, float* out, int64_t n);

// The row kernels, one per ISA level (k_quants_dot.cpp, k_quants_avx2.cpp, k_quants_avx512.cpp:
// Q2_K and Q3_K run the AVX2 ones at the AVX-512 level).
namespace scalar_dot { extern const RowDot q2_k, q3_k, q4_k, q5_k, q6_k; }
namespace avx2_dot { extern const RowDot q2_k, q3_k, q4_k, q5_k, q6_k; }
namespace avx512_dot { extern const RowDot q4_k, q5_k, q6_k; }

}  // namespace cpullm
