// Q4_1's AVX2 row kernel: per block one 16-byte load gives the 32 nibbles in value order (low
// nibbles, then the high ones shifted down), which meet each token's 32 activations in one
// maddubs (unsigned nibbles as stored, signed activations; pairs at most 2 * 15 * 127) and one
// madd: eight exact int32 partial sums. One FMA scales them by d * s per token; the minimum's
// term, m * s * sum(a), is one scalar FMA per block and token. Two accumulators per token, as
// the other block kernels keep (dot_avx2.cpp), so a block does not wait on the last one's FMA.
#include <immintrin.h>

#include "engine/kernels/int8_rows.hpp"
#include "engine/kernels/q4_1.hpp"

namespace cpullm {
namespace {

template <int T>
struct Q4_1Kernel {
  static void run(const std::byte* row, const void* const* activations, int64_t cols, float* out) {
    const auto* blocks = reinterpret_cast<const BlockQ4_1*>(row);
    const auto* const* a = reinterpret_cast<const QuantizedActivations* const*>(activations);
    __m256 acc[2][T];
    float minimums[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[0][t] = acc[1][t] = _mm256_setzero_ps(), minimums[t] = 0.0f;
    for (int64_t b = 0; b < cols / kQuantBlock; ++b) {
      prefetch_ahead(blocks + b);
      const __m256i q = nibbles_in_order(blocks[b]);
      const float d = fp16_to_fp32(blocks[b].scale), m = fp16_to_fp32(blocks[b].minimum);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(q, load32_i8(a[t]->values + b * kQuantBlock)),
                                               _mm256_set1_epi16(1));
        const float s = a[t]->scales[b];
        acc[b % 2][t] = _mm256_fmadd_ps(_mm256_set1_ps(d * s), _mm256_cvtepi32_ps(sums), acc[b % 2][t]);
        minimums[t] += m * s * activation_sum(*a[t], b);
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) out[t] = horizontal_sum(_mm256_add_ps(acc[0][t], acc[1][t])) + minimums[t];
  }
};

}  // namespace

namespace avx2_dot {
const RowDot q4_1 = by_token_count<Q4_1Kernel>;
}

}  // namespace cpullm
