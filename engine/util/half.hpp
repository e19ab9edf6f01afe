// FP16 and BF16 <-> FP32 conversions. FP16 uses the compiler's _Float16, which on the
// x86-64-v3 baseline becomes F16C instructions and vectorises in loops.
#pragma once
#include <bit>
#include <cstdint>

namespace cpullm {

inline float fp16_to_fp32(uint16_t bits) { return static_cast<float>(std::bit_cast<_Float16>(bits)); }
inline uint16_t fp32_to_fp16(float value) { return std::bit_cast<uint16_t>(static_cast<_Float16>(value)); }

// BF16 is the upper half of an FP32.
inline float bf16_to_fp32(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }
inline uint16_t fp32_to_bf16(float value) {
  uint32_t u = std::bit_cast<uint32_t>(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // keep NaN a NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace cpullm
