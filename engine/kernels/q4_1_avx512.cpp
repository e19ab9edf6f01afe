// Q4_1's AVX-512 row kernel: two blocks a step in one 512-bit register. Their 64 nibbles (each
// block's low nibbles, then its high ones) meet the two blocks' 64 activations in one vpdpbusd
// (unsigned nibbles, signed activations): lanes 0-7 hold the first block's exact int32 partial
// sums, lanes 8-15 the second's; one FMA scales them by each block's d * s. The minimum's term,
// m * s * sum(a), is one scalar FMA per block and token. A row's odd last block runs alone in
// 256 bits. As dot_avx512.cpp: only the functions below the target pragma use AVX-512, and they
// run only after cpu_supports(Isa::Avx512).
#include <immintrin.h>

#include "engine/kernels/int8_rows.hpp"
#include "engine/kernels/q4_1.hpp"

// GCC 12's headers leave the upper half of a 256-to-512-bit cast undefined on purpose and
// then warn about it (GCC bug 105593); the upper halves here are always written.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni")

namespace cpullm {
namespace {

// Two 8-float halves as one register (insertf64x4: AVX-512F, where insertf32x8 needs DQ).
inline __m512 join(__m256 low, __m256 high) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(low)), _mm256_castps_pd(high), 1));
}

template <int T>
struct Q4_1Kernel {
  static void run(const std::byte* row, const void* const* activations, int64_t cols, float* out) {
    const auto* blocks = reinterpret_cast<const BlockQ4_1*>(row);
    const auto* const* a = reinterpret_cast<const QuantizedActivations* const*>(activations);
    const int64_t count = cols / kQuantBlock;
    __m512 acc[T];
    float minimums[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps(), minimums[t] = 0.0f;
    int64_t b = 0;
    for (; b + 2 <= count; b += 2) {
      prefetch_ahead(blocks + b);
      prefetch_ahead(blocks + b + 1);
      const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(nibbles_in_order(blocks[b])), nibbles_in_order(blocks[b + 1]), 1);
      const float d0 = fp16_to_fp32(blocks[b].scale), d1 = fp16_to_fp32(blocks[b + 1].scale);
      const float m0 = fp16_to_fp32(blocks[b].minimum), m1 = fp16_to_fp32(blocks[b + 1].minimum);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, _mm512_loadu_si512(a[t]->values + b * kQuantBlock));
        const float s0 = a[t]->scales[b], s1 = a[t]->scales[b + 1];
        acc[t] = _mm512_fmadd_ps(join(_mm256_set1_ps(d0 * s0), _mm256_set1_ps(d1 * s1)), _mm512_cvtepi32_ps(sums), acc[t]);
        minimums[t] += m0 * s0 * activation_sum(*a[t], b);
        minimums[t] += m1 * s1 * activation_sum(*a[t], b + 1);
      }
    }
    if (b < count) {
      const __m256i q = nibbles_in_order(blocks[b]);
      const float d = fp16_to_fp32(blocks[b].scale), m = fp16_to_fp32(blocks[b].minimum);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, load32_i8(a[t]->values + b * kQuantBlock));
        const float s = a[t]->scales[b];
        acc[t] = _mm512_add_ps(acc[t], join(_mm256_mul_ps(_mm256_set1_ps(d * s), _mm256_cvtepi32_ps(sums)), _mm256_setzero_ps()));
        minimums[t] += m * s * activation_sum(*a[t], b);
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) out[t] = _mm512_reduce_add_ps(acc[t]) + minimums[t];
  }
};

}  // namespace

namespace avx512_dot {
const RowDot q4_1 = by_token_count<Q4_1Kernel>;
}

}  // namespace cpullm

#pragma GCC pop_options
