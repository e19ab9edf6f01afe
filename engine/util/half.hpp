// FP16 and BF16 <-> FP32 conversions. FP16 uses the compiler's _Float16, which on the
// x86-64-v3 baseline becomes F16C instructions and vectorises in loops.
#pragma once
#include <bit>
#include <cstdint>
#if defined(__clang__) && __clang_major__ < 15
#include <immintrin.h>
#endif

namespace cpullm {

#if defined(__clang__) && __clang_major__ < 15
// Clang before 15 has no _Float16 on x86 (Debian's clang 14 builds the fuzz targets): the same
// F16C conversions, called directly, rounding to nearest even as the cast does.
inline float fp16_to_fp32(uint16_t bits) { return _cvtsh_ss(bits); }
inline uint16_t fp32_to_fp16(float value) { return _cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT); }
#else
inline float fp16_to_fp32(uint16_t bits) { return static_cast<float>(std::bit_cast<_Float16>(bits)); }
inline uint16_t fp32_to_fp16(float value) { return std::bit_cast<uint16_t>(static_cast<_Float16>(value)); }
#endif

// BF16 is the upper half of an FP32.
inline float bf16_to_fp32(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }
inline uint16_t fp32_to_bf16(float value) {
  uint32_t u = std::bit_cast<uint32_t>(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // keep NaN a NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace cpullm
