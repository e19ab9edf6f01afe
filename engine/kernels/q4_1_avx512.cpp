// Q4_1's AVX-512 row kernel: four blocks a step, two in each 512-bit register. A register's 64
// nibbles (each block's low nibbles, then its high ones) meet the two blocks' 64 activations in
// one vpdpbusd (unsigned nibbles, signed activations): lanes 0-7 hold the first block's exact
// int32 partial sums, lanes 8-15 the second's; one FMA scales them by each block's d * s, picked
// from the four blocks' products by one permute. The scales and minimums are one FP16
// conversion per step and the minimums' terms m * s * sum(a) one vector FMA per token (q4_1.hpp),
// so no scalar chain runs from block to block. A row's last 1-3 blocks run one by one in 256 bits. As dot_avx512.cpp: only the functions below the target pragma use AVX-512, and they
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
    // Which of the four blocks' d * s each lane takes: lanes 0-7 the first of a register's two blocks.
    const __m512i first_pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i second_pair = _mm512_add_epi32(first_pair, _mm512_set1_epi32(2));
    __m512 acc[2][T];
    __m128 minimums[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[0][t] = acc[1][t] = _mm512_setzero_ps(), minimums[t] = _mm_setzero_ps();
    int64_t b = 0;
    for (; b + 4 <= count; b += 4) {
      prefetch_ahead(blocks + b);
      prefetch_ahead(blocks + b + 3);
      const ScalesAndMinimums sm = scales_and_minimums(blocks + b);
      const __m512i q[2] = {
          _mm512_inserti64x4(_mm512_castsi256_si512(nibbles_in_order(blocks[b])), nibbles_in_order(blocks[b + 1]), 1),
          _mm512_inserti64x4(_mm512_castsi256_si512(nibbles_in_order(blocks[b + 2])), nibbles_in_order(blocks[b + 3]), 1)};
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m512 ds = _mm512_zextps128_ps512(_mm_mul_ps(sm.d, _mm_loadu_ps(a[t]->scales + b)));
        minimums[t] = _mm_add_ps(minimums[t], minimum_terms(sm, *a[t], b));
        const int8_t* x = a[t]->values + b * kQuantBlock;
        const __m512i sums0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[0], _mm512_loadu_si512(x));
        const __m512i sums1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[1], _mm512_loadu_si512(x + 2 * kQuantBlock));
        acc[0][t] = _mm512_fmadd_ps(_mm512_permutexvar_ps(first_pair, ds), _mm512_cvtepi32_ps(sums0), acc[0][t]);
        acc[1][t] = _mm512_fmadd_ps(_mm512_permutexvar_ps(second_pair, ds), _mm512_cvtepi32_ps(sums1), acc[1][t]);
      }
    }
    float tail[T] = {};
    for (; b < count; ++b) {  // the row's last 1-3 blocks, one by one in 256 bits
      const __m256i q = nibbles_in_order(blocks[b]);
      const float d = fp16_to_fp32(blocks[b].scale), m = fp16_to_fp32(blocks[b].minimum);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, load32_i8(a[t]->values + b * kQuantBlock));
        const float s = a[t]->scales[b];
        acc[0][t] = _mm512_add_ps(acc[0][t], join(_mm256_mul_ps(_mm256_set1_ps(d * s), _mm256_cvtepi32_ps(sums)), _mm256_setzero_ps()));
        tail[t] += m * s * activation_sum(*a[t], b);
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m128 two = _mm_add_ps(minimums[t], _mm_movehl_ps(minimums[t], minimums[t]));
      out[t] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][t], acc[1][t])) + _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two))) + tail[t];
    }
  }
};

}  // namespace

namespace avx512_dot {
const RowDot q4_1 = by_token_count<Q4_1Kernel>;
}

}  // namespace cpullm

#pragma GCC pop_options
