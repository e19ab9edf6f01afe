// Q5_0 and Q5_1, llama.cpp's 5-bit formats: 32 values per block, the low 4 bits of each value in
// 16 nibble bytes (byte j: value j low, value j + 16 high, as Q4_0), the fifth bits in a 32-bit
// mask (bit j: value j).
//   Q5_0: 22-byte block, FP16 d, mask, nibbles;             x = d * (q - 16), q = 0..31
//   Q5_1: 24-byte block, FP16 d, FP16 m, mask, nibbles;     x = d * q + m
// The quantizers are llama.cpp's quantize_row_q5_0_ref and quantize_row_q5_1_ref, rounding
// included. The row kernels take Q8_0 activations (dot.hpp): sum(q * a) is exact in int32 with q
// unsigned; Q5_0's -16 and Q5_1's minimum come from the activation block's sum (block_offsets).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/kernels/dot.hpp"
#include "engine/kernels/quant_formats.hpp"

namespace cpullm {

struct BlockQ5_0 {
  uint16_t scale;                   // FP16 d
  uint8_t high_bits[4];             // bit j: value j's fifth bit (little-endian uint32)
  uint8_t nibbles[kQuantBlock / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

struct BlockQ5_1 {
  uint16_t scale;                   // FP16 d
  uint16_t minimum;                 // FP16 m
  uint8_t high_bits[4];             // bit j: value j's fifth bit (little-endian uint32)
  uint8_t nibbles[kQuantBlock / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// Value j's fifth bit in bit j of the block's little-endian mask.
inline uint32_t high_bits(const uint8_t bytes[4]) {
  uint32_t mask;
  std::memcpy(&mask, bytes, sizeof mask);
  return mask;
}

// Block b's 32 values q = 0..31 in value order: nibble byte j holds values j and j + 16.
template <typename Block>
inline void levels_in_order(const Block& block, int levels[kQuantBlock]) {
  const uint32_t mask = high_bits(block.high_bits);
  for (int j = 0; j < kQuantBlock / 2; ++j) {
    levels[j] = (block.nibbles[j] & 0x0f) | static_cast<int>((mask >> j) & 1) << 4;
    levels[j + kQuantBlock / 2] = (block.nibbles[j] >> 4) | static_cast<int>((mask >> (j + kQuantBlock / 2)) & 1) << 4;
  }
}

void quantize_row_q5_0(const float* x, std::byte* row, int64_t n);
void quantize_row_q5_1(const float* x, std::byte* row, int64_t n);
void dequantize_row_q5_0(const std::byte* row, float* out, int64_t n);
void dequantize_row_q5_1(const std::byte* row, float* out, int64_t n);

// The row kernels, one per ISA level (q5.cpp, q5_avx2.cpp, q5_avx512.cpp).
namespace scalar_dot { extern const RowDot q5_0, q5_1; }
namespace avx2_dot { extern const RowDot q5_0, q5_1; }
namespace avx512_dot { extern const RowDot q5_0, q5_1; }

}  // namespace cpullm
