// The GEMM micro-kernels in plain C++: the same panels and tiles as the SIMD levels, one
// multiply-add at a time.
#include <cstring>

#include "engine/kernels/gemm.hpp"

namespace cpullm {
namespace {

constexpr int kRows = 8, kTokens = 4;

void float_tile(const FloatTile& t) {
  float acc[kTokens][kRows] = {};
  for (int64_t k = 0; k < t.depth; ++k)
    for (int64_t n = 0; n < t.tokens; ++n)
      for (int r = 0; r < kRows; ++r) acc[n][r] += t.panel[k * kRows + r] * t.x[n * t.x_stride + k];
  write_tile<kRows>(&acc[0][0], t.y, t.y_stride, t.rows, t.tokens, t.accumulate);
}

void integer_tile(const IntegerTile& t) {
  float acc[kTokens][kRows] = {};
  for (int64_t b = 0; b < t.blocks; ++b) {
    const auto* weights = reinterpret_cast<const int8_t*>(t.panel + b * integer_panel_block_bytes(kRows));
    float scales[kRows];
    std::memcpy(scales, weights + kQuantBlock * kRows, sizeof scales);
    for (int64_t n = 0; n < t.tokens; ++n) {
      const ActivationBlock& a = t.a[n * t.a_stride + b];
      for (int r = 0; r < kRows; ++r) {
        int32_t sum = 0;
        for (int j = 0; j < kQuantBlock; ++j) sum += weights[(j / 4 * kRows + r) * 4 + j % 4] * a.q[j];
        acc[n][r] += scales[r] * a.scale * static_cast<float>(sum);
      }
    }
  }
  write_tile<kRows>(&acc[0][0], t.y, t.y_stride, t.rows, t.tokens, t.accumulate);
}

// Each half of a block on its own: as * (scale * sum(q * a) + offset * sum(a)).
void sub_block_tile(const IntegerTile& t) {
  float acc[kTokens][kRows] = {};
  for (int64_t b = 0; b < t.blocks; ++b) {
    const auto* weights = reinterpret_cast<const uint8_t*>(t.panel + b * sub_block_panel_block_bytes(kRows));
    float factors[4][kRows];  // scales of each half, then offsets of each half
    std::memcpy(factors, weights + kQuantBlock * kRows, sizeof factors);
    for (int64_t n = 0; n < t.tokens; ++n) {
      const ActivationBlock& a = t.a[n * t.a_stride + b];
      for (int r = 0; r < kRows; ++r)
        for (int h = 0; h < 2; ++h) {
          int32_t sum = 0;
          for (int j = h * kQuantBlock / 2; j < (h + 1) * kQuantBlock / 2; ++j)
            sum += weights[(j / 4 * kRows + r) * 4 + j % 4] * a.q[j];
          acc[n][r] += factors[h][r] * a.scale * static_cast<float>(sum) + factors[2 + h][r] * a.half_sums[h];
        }
    }
  }
  write_tile<kRows>(&acc[0][0], t.y, t.y_stride, t.rows, t.tokens, t.accumulate);
}

}  // namespace

const GemmKernels& scalar_gemm_kernels() {
  static constexpr IntegerTileKernel kInteger{integer_tile, kRows, kTokens, PanelWeights::Signed};
  static constexpr IntegerTileKernel kSubBlocks{sub_block_tile, kRows, kTokens, PanelWeights::Unsigned};
  static const GemmKernels kernels{float_tile, kRows, kTokens, kInteger, kInteger, kSubBlocks, kSubBlocks};
  return kernels;
}

}  // namespace cpullm
