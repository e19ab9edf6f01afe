// IQ4_NL, llama.cpp's non-linear 4-bit format: 32 values per 18-byte block, an FP16 scale d and
// 16 bytes of 4-bit indices (Q4_0's nibble order: byte j holds value j low, value j + 16 high)
// into a fixed table of 16 int8 levels, spaced closer near zero; x = d * kIq4NlLevels[index].
// The quantizer is llama-quantize's (quantize_iq4_nl without an importance matrix: a search over
// 15 scales per block, weighted by x^2), so the same FP32 input gives the same bytes.
//
// The kernels read a block's 32 weights as signed bytes through one table lookup (pshufb), so
// Q8_0's row kernels and the GEMM's integer panels run it as they run Q8_0 (int8_rows.hpp:
// Iq4NlRow).
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/kernels/quant_formats.hpp"

namespace cpullm {

struct BlockIQ4_NL {
  uint16_t scale;                    // FP16 d
  uint8_t indices[kQuantBlock / 2];  // low nibbles: values 0..15, high nibbles: values 16..31
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// The levels an index selects (llama.cpp's kvalues_iq4nl), ascending.
inline constexpr int8_t kIq4NlLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// One row of n values (n a multiple of kQuantBlock), as the registry's codecs take it.
void quantize_row_iq4_nl(const float* x, std::byte* row, int64_t n);
void dequantize_row_iq4_nl(const std::byte* row, float* out, int64_t n);

}  // namespace cpullm
