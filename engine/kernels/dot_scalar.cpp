// The reference dot products: plain loops, sums in order, one token after another. Every SIMD
// kernel is tested against these; they are also the `--isa scalar` level.
#include "engine/kernels/dot.hpp"
#include "engine/kernels/int8_rows.hpp"
#include "engine/util/half.hpp"

namespace cpullm {
namespace {

template <std::size_t kElement, float (*Load)(const std::byte*)>
void dot_float_row(const std::byte* row, const void* const* activations, int tokens, int64_t cols, float* out) {
  for (int t = 0; t < tokens; ++t) {
    const auto* x = static_cast<const float*>(activations[t]);
    float sum = 0.0f;
    for (int64_t i = 0; i < cols; ++i) sum += Load(row + i * kElement) * x[i];
    out[t] = sum;
  }
}

// An exact integer sum per block, scaled by both blocks' scales, summed in order.
struct ScalarBlockDot {
  template <int T>
  struct Tokens {
    template <typename Row>
    static void run(const Row& w, const QuantizedActivations* const* activations, int64_t cols, float* out) {
      for (int t = 0; t < T; ++t) {
        const QuantizedActivations& a = *activations[t];
        float sum = 0.0f;
        for (int64_t b = 0; b < cols / kQuantBlock; ++b) {
          int32_t block_sum = 0;
          for (int64_t j = 0; j < kQuantBlock; ++j) block_sum += w.weight(b, j) * a.values[b * kQuantBlock + j];
          sum += w.scale(b) * a.scales[b] * static_cast<float>(block_sum);
        }
        out[t] = sum;
      }
    }
  };
};
using ScalarIntegerKernels = IntegerRowKernels<ScalarBlockDot>;

// A CPULLM_Q4_0_R8 or CPULLM_Q8_0_R8 group: each of its rows as a row of its own, one token after another.
template <typename Plain>
void dot_interleaved(const std::byte* group, const void* const* activations, int tokens, int64_t cols, float* out) {
  const auto* a = reinterpret_cast<const QuantizedActivations* const*>(activations);
  const auto* blocks = reinterpret_cast<const Interleaved8<typename Plain::Block>*>(group);
  for (int t = 0; t < tokens; ++t)
    for (int r = 0; r < kInterleavedRows; ++r)
      ScalarBlockDot::Tokens<1>::run(InterleavedRow<Plain>{blocks, r}, a + t, cols, out + t * kInterleavedRows + r);
}

}  // namespace

namespace scalar_dot {
const RowDot f32 = dot_float_row<4, load_f32>;
const RowDot f16 = dot_float_row<2, load_f16>;
const RowDot bf16 = dot_float_row<2, load_bf16>;
const RowDot q8_0 = ScalarIntegerKernels::q8_0;
const RowDot q4_0 = ScalarIntegerKernels::q4_0;
const RowDot int8_channel = ScalarIntegerKernels::int8_channel;
const RowDot iq4_nl = ScalarIntegerKernels::iq4_nl;
const RowDot q4_0_r8 = dot_interleaved<Q4_0Row>;
const RowDot q8_0_r8 = dot_interleaved<Q8_0Row>;
}  // namespace scalar_dot

}  // namespace cpullm
