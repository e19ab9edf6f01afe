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

}  // namespace

const GemmKernels& scalar_gemm_kernels() {
  static constexpr IntegerTileKernel kInteger{integer_tile, kRows, kTokens, PanelWeights::Signed};
  static const GemmKernels kernels{float_tile, kRows, kTokens, kInteger, kInteger};
  return kernels;
}

}  // namespace cpullm
