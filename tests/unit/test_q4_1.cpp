// Q4_1 (engine/kernels/q4_1.hpp): the quantizer's error bound and the layout by hand. llama.cpp's
// Q4_1 file is read and written as llama.cpp does in test_llama_cpp_files.cpp; the row kernels at
// every ISA level are checked against the scalar one with the other formats (test_kernels.cpp,
// every registry entry).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/kernels/q4_1.hpp"
#include "engine/kernels/row_convert.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

// Each value comes back within half a step d / 2 of itself, plus what rounding d and the
// minimum m to FP16 adds (2^-11 of each, d times up to 15 steps) and the FP32 arithmetic.
TEST(Q4_1, QuantizeStaysWithinHalfAStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.3f, 1.0f);  // off-centre: the minimum matters
  std::vector<float> x(4096), back(x.size());
  for (float& v : x) v = dist(rng);
  std::vector<std::byte> row(row_bytes(GgmlType::Q4_1, 4096));
  encode_row(GgmlType::Q4_1, x.data(), row.data(), 4096);
  decode_row(GgmlType::Q4_1, row.data(), back.data(), 4096);
  for (int64_t b = 0; b < 4096 / kQuantBlock; ++b) {
    const float* block = &x[b * kQuantBlock];
    const float lo = *std::min_element(block, block + kQuantBlock), hi = *std::max_element(block, block + kQuantBlock);
    const float d = (hi - lo) / 15;
    for (int64_t j = 0; j < kQuantBlock; ++j) {
      const float bound = d / 2 + 16 * d * 0x1.0p-11f + std::abs(lo) * 0x1.0p-11f + 1e-6f;
      ASSERT_LE(std::abs(back[b * kQuantBlock + j] - block[j]), bound) << "block " << b << " value " << j;
    }
  }
}

// The layout by hand: d = 1, m = -8, nibble j = j % 16 (low) and 15 - j % 16 (high).
TEST(Q4_1, BlockLayoutIsLlamaCpps) {
  BlockQ4_1 block{fp32_to_fp16(1.0f), fp32_to_fp16(-8.0f), {}};
  for (int j = 0; j < 16; ++j) block.nibbles[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  float out[32];
  dequantize_row_q4_1(reinterpret_cast<const std::byte*>(&block), out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], static_cast<float>(j) - 8) << j;
    EXPECT_EQ(out[16 + j], static_cast<float>(15 - j) - 8) << j;
  }
}

}  // namespace
}  // namespace cpullm
