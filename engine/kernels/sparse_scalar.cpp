// The reference sparse kernels: plain loops over the stored values, sums in stored order. The
// SIMD levels (sparse_simd.hpp) are tested against these and against dense products of the
// pruned matrices; they are also the `--isa scalar` level.
#include "engine/kernels/sparse.hpp"

namespace cpullm {
namespace {

struct ScalarSparse {
  // ELL and N:M: y[r] = sum over stored j of value_j * x[column_j].
  template <SparsePattern P, GgmlType V>
  static void gather_rows(const SparseView& w, const float* x, float* y, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const std::byte* values = w.data + r * w.stride;
      const std::byte* indices = values + w.kept * kValueBytes<V>;
      float sum = 0.0f;
      for (int64_t j = 0; j < w.kept; ++j)
        sum += load_value<V>(values + j * kValueBytes<V>) * x[column_of<P>(w, indices, j)];
      y[r] = sum;
    }
  }

  // BLOCK4X4: each kept block adds its 4x4 values times x's 4 values at its column to 4 outputs.
  template <GgmlType V>
  static void block_rows(const SparseView& w, const float* x, float* y, int64_t r0, int64_t r1) {
    for (int64_t strip = r0 / 4; strip < r1 / 4; ++strip) {
      const std::byte* values = w.data + strip * w.stride;
      const std::byte* columns = values + w.kept * 16 * kValueBytes<V>;
      float sum[4] = {};
      for (int64_t b = 0; b < w.kept; ++b) {
        const float* xb = x + 4 * block_column(columns, b);
        for (int i = 0; i < 4; ++i)
          for (int k = 0; k < 4; ++k) sum[i] += load_value<V>(values + (b * 16 + i * 4 + k) * kValueBytes<V>) * xb[k];
      }
      for (int i = 0; i < 4; ++i) y[strip * 4 + i] = sum[i];
    }
  }

  template <SparsePattern P, GgmlType V>
  static void gather_tile(const SparseView& w, const float* xt, int64_t tokens, float* y, int64_t y_stride,
                          int64_t r0, int64_t r1) {
    constexpr int64_t T = kSparseTileTokens;
    for (int64_t r = r0; r < r1; ++r) {
      const std::byte* values = w.data + r * w.stride;
      const std::byte* indices = values + w.kept * kValueBytes<V>;
      float sum[T] = {};
      for (int64_t j = 0; j < w.kept; ++j) {
        const float value = load_value<V>(values + j * kValueBytes<V>);
        const float* xc = xt + column_of<P>(w, indices, j) * T;
        for (int64_t t = 0; t < T; ++t) sum[t] += value * xc[t];
      }
      for (int64_t t = 0; t < tokens; ++t) y[t * y_stride + r] = sum[t];
    }
  }

  template <GgmlType V>
  static void block_tile(const SparseView& w, const float* xt, int64_t tokens, float* y, int64_t y_stride,
                         int64_t r0, int64_t r1) {
    constexpr int64_t T = kSparseTileTokens;
    for (int64_t strip = r0 / 4; strip < r1 / 4; ++strip) {
      const std::byte* values = w.data + strip * w.stride;
      const std::byte* columns = values + w.kept * 16 * kValueBytes<V>;
      float sum[4][T] = {};
      for (int64_t b = 0; b < w.kept; ++b) {
        const float* xb = xt + 4 * block_column(columns, b) * T;
        for (int i = 0; i < 4; ++i)
          for (int k = 0; k < 4; ++k) {
            const float value = load_value<V>(values + (b * 16 + i * 4 + k) * kValueBytes<V>);
            for (int64_t t = 0; t < T; ++t) sum[i][t] += value * xb[k * T + t];
          }
      }
      for (int i = 0; i < 4; ++i)
        for (int64_t t = 0; t < tokens; ++t) y[t * y_stride + strip * 4 + i] = sum[i][t];
    }
  }
};

}  // namespace

const SparseKernels& scalar_sparse_kernels() {
  static const SparseKernels kernels = sparse_kernel_table<ScalarSparse>();
  return kernels;
}

}  // namespace cpullm
