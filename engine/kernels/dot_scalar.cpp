// The reference dot products: plain loops, sums in order. Every SIMD kernel is tested against
// these; they are also the `--isa scalar` level.
#include "engine/kernels/dot.hpp"
#include "engine/kernels/gemm_tiles.hpp"
#include "engine/kernels/int8_rows.hpp"
#include "engine/util/half.hpp"

namespace cpullm {
namespace {

template <std::size_t kElement, float (*Load)(const std::byte*)>
float dot_float_row(const std::byte* row, const void* activations, int64_t cols) {
  const auto* x = static_cast<const float*>(activations);
  float sum = 0.0f;
  for (int64_t i = 0; i < cols; ++i) sum += Load(row + i * kElement) * x[i];
  return sum;
}

// An exact integer sum per block, scaled by both blocks' scales, summed in order.
struct ScalarBlockDot {
  template <typename Row>
  static float run(const Row& w, const QuantizedActivations& a, int64_t cols) {
    float sum = 0.0f;
    for (int64_t b = 0; b < cols / kQuantBlock; ++b) {
      int32_t block_sum = 0;
      for (int64_t j = 0; j < kQuantBlock; ++j) block_sum += w.weight(b, j) * a.blocks[b].q[j];
      sum += w.scale(b) * fp16_to_fp32(a.blocks[b].scale) * static_cast<float>(block_sum);
    }
    return sum;
  }
};
using ScalarIntegerKernels = IntegerRowKernels<ScalarBlockDot>;

// GEMM tiles of 4 rows x 4 tokens. Each output sums its terms in the same order as the dot
// products above, so the scalar GEMM reproduces the reference (FMA contraction aside).
template <std::size_t kElement, float (*Load)(const std::byte*)>
struct ScalarFloatTile {
  static constexpr int kRows = 4, kTokens = 4;
  template <int M, int N>
  static void run(const GemmBlock& b, int64_t r, int64_t t) {
    const FloatTileOperands<M, N> operands(b, r, t);
    const auto& [w, x] = operands;
    float acc[M][N] = {};
    for (int64_t i = 0; i < b.cols; ++i)
      for (int m = 0; m < M; ++m) {
        const float wi = Load(w[m] + i * kElement);
        for (int n = 0; n < N; ++n) acc[m][n] += wi * x[n][i];
      }
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) b.y[(t + n) * b.y_stride + r + m] = acc[m][n];
  }
};

template <typename Row>
struct ScalarIntegerTile {
  static constexpr int kRows = 4, kTokens = 4;
  template <int M, int N>
  static void run(const GemmBlock& b, int64_t r, int64_t t) {
    const IntegerTileOperands<Row, M, N> operands(b, r, t);
    const auto& [w, a] = operands;
    float acc[M][N] = {};
    for (int64_t k = 0; k < b.cols / kQuantBlock; ++k)
      for (int m = 0; m < M; ++m) {
        int32_t wk[kQuantBlock];  // block k of row m, unpacked once for the N tokens
        for (int64_t j = 0; j < kQuantBlock; ++j) wk[j] = w[m].weight(k, j);
        for (int n = 0; n < N; ++n) {
          int32_t block_sum = 0;
          for (int64_t j = 0; j < kQuantBlock; ++j) block_sum += wk[j] * a[n][k].q[j];
          acc[m][n] += w[m].scale(k) * fp16_to_fp32(a[n][k].scale) * static_cast<float>(block_sum);
        }
      }
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) b.y[(t + n) * b.y_stride + r + m] = acc[m][n];
  }
};

}  // namespace

const DotKernels& scalar_dot_kernels() {
  static const DotKernels kernels{dot_float_row<4, load_f32>, dot_float_row<2, load_f16>, dot_float_row<2, load_bf16>,
                                  ScalarIntegerKernels::q8_0, ScalarIntegerKernels::q4_0,
                                  ScalarIntegerKernels::int8_channel};
  return kernels;
}

const GemmKernels& scalar_gemm_kernels() {
  static const GemmKernels kernels{
      gemm_kernel<ScalarFloatTile<4, load_f32>>(), gemm_kernel<ScalarFloatTile<2, load_f16>>(),
      gemm_kernel<ScalarFloatTile<2, load_bf16>>(), gemm_kernel<ScalarIntegerTile<Q8_0Row>>(),
      gemm_kernel<ScalarIntegerTile<Q4_0Row>>(), gemm_kernel<ScalarIntegerTile<Int8ChannelRow>>()};
  return kernels;
}

}  // namespace cpullm
