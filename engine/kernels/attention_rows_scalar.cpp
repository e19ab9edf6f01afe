// The reference row kernels of decode attention: one value at a time, in column order.
#include "engine/kernels/attention_rows.hpp"

namespace cpullm {
namespace {

template <GgmlType V>
struct ScalarRows {
  static void score(float* scores, int64_t scores_stride, const float* q, int64_t heads, const std::byte* rows,
                    int64_t stride, int64_t n, int64_t head_dim, float scale) {
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < n; ++j) {
        float sum = 0.0f;
        for (int64_t c = 0; c < head_dim; ++c) sum += q[h * head_dim + c] * value_at<V>(rows + j * stride, c);
        scores[h * scores_stride + j] = sum * scale;
      }
  }
  static void accumulate(float* out, int64_t out_stride, const float* coefficients, int64_t coefficients_stride,
                         int64_t heads, const std::byte* rows, int64_t stride, int64_t n, int64_t head_dim) {
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t k = 0; k < n; ++k)
        for (int64_t c = 0; c < head_dim; ++c)
          out[h * out_stride + c] += coefficients[h * coefficients_stride + k] * value_at<V>(rows + k * stride, c);
  }
};

}  // namespace

const AttentionRowTable& scalar_attention_rows() {
  static const AttentionRowTable table = attention_rows_of<ScalarRows>();
  return table;
}

}  // namespace cpullm
