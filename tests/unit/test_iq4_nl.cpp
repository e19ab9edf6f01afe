// IQ4_NL (engine/kernels/iq4_nl.hpp): the layout by hand, values on the levels coming back as
// they were, and the quantizer's error against the plain scale it starts its search from. The row
// kernels at every ISA level are checked against the scalar one with the other formats
// (test_kernels.cpp, every registry entry), the GEMM in test_matmul.cpp, and a whole quantized
// model against the numpy reference in tests/python/test_logits_vs_numpy.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/kernels/iq4_nl.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/util/half.hpp"

namespace cpullm {
namespace {

// d = 0.5, index j % 16 in the low nibbles and 15 - j % 16 in the high ones.
TEST(Iq4Nl, BlockLayoutIsLlamaCpps) {
  BlockIQ4_NL block{fp32_to_fp16(0.5f), {}};
  for (int j = 0; j < 16; ++j) block.indices[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  float out[32];
  dequantize_row_iq4_nl(reinterpret_cast<const std::byte*>(&block), out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.5f * kIq4NlLevels[j]) << j;
    EXPECT_EQ(out[16 + j], 0.5f * kIq4NlLevels[15 - j]) << j;
  }
}

// A block whose values are levels times a scale exact in FP16 (every level once, twice) is found
// again exactly: the least-squares scale of the right indices is the scale itself.
TEST(Iq4Nl, ValuesOnTheLevelsComeBackExactly) {
  float x[32], back[32];
  for (int j = 0; j < 32; ++j) x[j] = 0.25f * kIq4NlLevels[(j * 7) % 16];
  BlockIQ4_NL block;
  quantize_row_iq4_nl(x, reinterpret_cast<std::byte*>(&block), 32);
  dequantize_row_iq4_nl(reinterpret_cast<const std::byte*>(&block), back, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(back[j], x[j]) << j;
  // An all-zero block: scale 0, every value 0.
  std::fill_n(x, 32, 0.0f);
  quantize_row_iq4_nl(x, reinterpret_cast<std::byte*>(&block), 32);
  EXPECT_EQ(fp16_to_fp32(block.scale), 0.0f);
  dequantize_row_iq4_nl(reinterpret_cast<const std::byte*>(&block), back, 32);
  for (float v : back) EXPECT_EQ(v, 0.0f);
}

// One of the scales the search tries maps the largest |x| exactly onto the lowest level; it keeps
// the least-squares refit of a candidate's indices only when that explains more of the block
// (weights x^2), and a refit and then the nearest indices only lower the error. So on every block
// the weighted squared error is at most that candidate's (plus what rounding the kept scale to
// FP16 adds), and on Gaussian data the row's error stays within a few percent of its size.
TEST(Iq4Nl, SearchNeverLosesToTheStartingScale) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  constexpr int64_t n = 8192;
  std::vector<float> x(n), back(n);
  for (float& v : x) v = dist(rng);
  std::vector<std::byte> row(row_bytes(GgmlType::IQ4_NL, n));
  encode_row(GgmlType::IQ4_NL, x.data(), row.data(), n);
  decode_row(GgmlType::IQ4_NL, row.data(), back.data(), n);
  double error2 = 0, size2 = 0;
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float* block = &x[b * kQuantBlock];
    float amax = 0, max = 0;
    for (int j = 0; j < kQuantBlock; ++j)
      if (std::abs(block[j]) > amax) amax = std::abs(block[j]), max = block[j];
    const float start = max / kIq4NlLevels[0];  // the lowest level times start is the largest |x|
    double searched = 0, plain = 0;
    for (int j = 0; j < kQuantBlock; ++j) {
      const float w = block[j] * block[j];
      float nearest = kIq4NlLevels[0] * start;
      for (int8_t level : kIq4NlLevels)
        if (std::abs(level * start - block[j]) < std::abs(nearest - block[j])) nearest = level * start;
      searched += w * std::pow(back[b * kQuantBlock + j] - block[j], 2);
      plain += w * std::pow(nearest - block[j], 2);
      error2 += std::pow(back[b * kQuantBlock + j] - block[j], 2), size2 += block[j] * block[j];
    }
    ASSERT_LE(searched, plain * 1.01 + 1e-6 * amax * amax) << "block " << b;
  }
  EXPECT_LT(std::sqrt(error2 / size2), 0.12) << "relative RMS error";
}

}  // namespace
}  // namespace cpullm
