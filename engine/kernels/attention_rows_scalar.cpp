// The reference row kernels of decode attention: one value at a time, in column order.
#include "engine/kernels/attention_rows.hpp"

namespace cpullm {
namespace {

template <GgmlType V>
struct ScalarRows {
  static void score(float* scores, const float* q, const std::byte* rows, int64_t stride, int64_t n, int64_t head_dim,
                    float scale) {
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int64_t c = 0; c < head_dim; ++c) sum += q[c] * value_at<V>(rows + j * stride, c);
      scores[j] = sum * scale;
    }
  }
  static void accumulate(float* out, const float* coefficients, const std::byte* rows, int64_t stride, int64_t n,
                         int64_t head_dim) {
    for (int64_t k = 0; k < n; ++k)
      for (int64_t c = 0; c < head_dim; ++c) out[c] += coefficients[k] * value_at<V>(rows + k * stride, c);
  }
};

}  // namespace

const AttentionRowTable& scalar_attention_rows() {
  static const AttentionRowTable table = attention_rows_of<ScalarRows>();
  return table;
}

}  // namespace cpullm
