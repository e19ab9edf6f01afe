// Q4_1's AVX2 row kernel, four blocks a step. Per block one 16-byte load gives the 32 nibbles in
// value order (low nibbles, then the high ones shifted down), which meet each token's 32
// activations in one maddubs (unsigned nibbles as stored, signed activations; pairs at most
// 2 * 15 * 127) and one madd: eight exact int32 partial sums, scaled by d * s in one FMA. The four
// blocks' scales and minimums are one FP16 conversion, and their minimums' terms m * s * sum(a)
// one vector FMA per token (q4_1.hpp): no scalar chain runs from block to block. Two accumulators
// per token, as the other block kernels keep (dot_avx2.cpp). A row's last 1-3 blocks run one by one.
#include <immintrin.h>

#include "engine/kernels/int8_rows.hpp"
#include "engine/kernels/q4_1.hpp"

namespace cpullm {
namespace {

inline __m256i block_sums(__m256i q, const int8_t* activations) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(q, load32_i8(activations)), _mm256_set1_epi16(1));
}

template <int T>
struct Q4_1Kernel {
  static void run(const std::byte* row, const void* const* activations, int64_t cols, float* out) {
    const auto* blocks = reinterpret_cast<const BlockQ4_1*>(row);
    const auto* const* a = reinterpret_cast<const QuantizedActivations* const*>(activations);
    const int64_t count = cols / kQuantBlock;
    __m256 acc[2][T];
    __m128 minimums[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[0][t] = acc[1][t] = _mm256_setzero_ps(), minimums[t] = _mm_setzero_ps();
    int64_t b = 0;
    for (; b + 4 <= count; b += 4) {
      prefetch_ahead(blocks + b);
      prefetch_ahead(blocks + b + 3);
      const ScalesAndMinimums sm = scales_and_minimums(blocks + b);
      __m256i q[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) q[j] = nibbles_in_order(blocks[b + j]);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256 ds = _mm256_zextps128_ps256(_mm_mul_ps(sm.d, _mm_loadu_ps(a[t]->scales + b)));
        minimums[t] = _mm_add_ps(minimums[t], minimum_terms(sm, *a[t], b));
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const __m256 scale = _mm256_permutevar8x32_ps(ds, _mm256_set1_epi32(j));
          const __m256i sums = block_sums(q[j], a[t]->values + (b + j) * kQuantBlock);
          acc[j % 2][t] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(sums), acc[j % 2][t]);
        }
      }
    }
    float tail[T] = {};
    for (; b < count; ++b) {
      const __m256i q = nibbles_in_order(blocks[b]);
      const float d = fp16_to_fp32(blocks[b].scale), m = fp16_to_fp32(blocks[b].minimum);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const float s = a[t]->scales[b];
        const __m256i sums = block_sums(q, a[t]->values + b * kQuantBlock);
        acc[0][t] = _mm256_fmadd_ps(_mm256_set1_ps(d * s), _mm256_cvtepi32_ps(sums), acc[0][t]);
        tail[t] += m * s * activation_sum(*a[t], b);
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t)
      out[t] = horizontal_sum(_mm256_add_ps(acc[0][t], acc[1][t])) +
               horizontal_sum(_mm256_zextps128_ps256(minimums[t])) + tail[t];
  }
};

}  // namespace

namespace avx2_dot {
const RowDot q4_1 = by_token_count<Q4_1Kernel>;
}

}  // namespace cpullm
