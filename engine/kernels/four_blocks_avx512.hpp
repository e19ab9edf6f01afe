// The AVX-512 row kernel of llama.cpp's 32-value block formats with an offset (Q4_1, Q5_0, Q5_1):
// four blocks a step, two in each 512-bit register. Format gives the block type, how two blocks'
// 64 values q (unsigned, value order) and one block's 32 come out of it, and which offset it has.
// One vpdpbusd per register and token meets the values with the activations (q unsigned,
// activations signed): lanes 0-7 partial sums of the first block, lanes 8-15 of the second,
// exact in int32. One permute spreads the four blocks' d * s over their lanes, one FMA each.
//   minimum (Q4_1, Q5_1): w.x = s * (d * sum(q * a) + m * sum(a)); the four blocks' minimum
//     terms are one vector FMA per token (int8_rows.hpp), so no scalar chain runs from block to
//     block, and the four blocks' d and m one FP16 conversion.
//   zero point 16 (Q5_0): w.a = sum(q * a) - 16 * sum(a) = sum(q * a) + 2 * offset (offset =
//     -8 * sum(a)): the vpdpbusd starts from 2 * offset in each block's first lane, so the sum
//     stays exact.
// A row's last 1-3 blocks run one by one in 256 bits. Included by each format's *_avx512.cpp
// inside its AVX-512 target region (the kernels run only after cpu_supports(Isa::Avx512)).
#pragma once
#include <immintrin.h>

#include "engine/kernels/int8_rows.hpp"

namespace cpullm {

enum class BlockOffset { minimum, zero_point_16 };

template <typename Format>
struct FourBlockKernel {
  using Block = typename Format::Block;
  static constexpr bool kMinimum = Format::kOffset == BlockOffset::minimum;

  template <int T>
  struct Kernel {
    static void run(const std::byte* row, const void* const* activations, int64_t cols, float* out) {
      const auto* blocks = reinterpret_cast<const Block*>(row);
      const auto* const* a = reinterpret_cast<const QuantizedActivations* const*>(activations);
      const int64_t count = cols / kQuantBlock;
      // Which of the four blocks' d * s each lane takes: lanes 0-7 the first of a register's two blocks.
      const __m512i first_pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
      const __m512i second_pair = _mm512_add_epi32(first_pair, _mm512_set1_epi32(2));
      // Q5_0: each block's 2 * offset into its first lane (lanes 0 and 8 of a register), the rest 0.
      const __m512i offset_lanes = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0);
      const __mmask16 first_lanes = 0x0101;
      __m512 acc[2][T];
      __m128 minimums[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[0][t] = acc[1][t] = _mm512_setzero_ps(), minimums[t] = _mm_setzero_ps();
      int64_t b = 0;
      for (; b + 4 <= count; b += 4) {
        prefetch_ahead(blocks + b);
        prefetch_ahead(blocks + b + 3);
        const ScalesAndMinimums sm = scales_and_minimums(blocks + b);
        const __m512i q[2] = {Format::pair(blocks + b), Format::pair(blocks + b + 2)};
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m512 ds = _mm512_zextps128_ps512(_mm_mul_ps(sm.d, _mm_loadu_ps(a[t]->scales + b)));
          const int8_t* x = a[t]->values + b * kQuantBlock;
          __m512i start[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
          if constexpr (kMinimum) {
            minimums[t] = _mm_add_ps(minimums[t], minimum_terms(sm, *a[t], b));
          } else {
            const __m512i twice = _mm512_zextsi128_si512(
                _mm_slli_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a[t]->block_offsets + b)), 1));
            start[0] = _mm512_maskz_permutexvar_epi32(first_lanes, offset_lanes, twice);
            start[1] = _mm512_maskz_permutexvar_epi32(first_lanes, _mm512_add_epi32(offset_lanes, _mm512_set1_epi32(2)), twice);
          }
          const __m512i sums0 = _mm512_dpbusd_epi32(start[0], q[0], _mm512_loadu_si512(x));
          const __m512i sums1 = _mm512_dpbusd_epi32(start[1], q[1], _mm512_loadu_si512(x + 2 * kQuantBlock));
          acc[0][t] = _mm512_fmadd_ps(_mm512_permutexvar_ps(first_pair, ds), _mm512_cvtepi32_ps(sums0), acc[0][t]);
          acc[1][t] = _mm512_fmadd_ps(_mm512_permutexvar_ps(second_pair, ds), _mm512_cvtepi32_ps(sums1), acc[1][t]);
        }
      }
      float tail[T] = {};
      for (; b < count; ++b) {  // the row's last 1-3 blocks, one by one in 256 bits
        const __m256i q = Format::one(blocks[b]);
        const float d = fp16_to_fp32(blocks[b].scale);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const float s = a[t]->scales[b];
          __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, load32_i8(a[t]->values + b * kQuantBlock));
          if constexpr (kMinimum) tail[t] += fp16_to_fp32(blocks[b].minimum) * s * activation_sum(*a[t], b);
          else sums = _mm256_add_epi32(sums, _mm256_setr_epi32(2 * a[t]->block_offsets[b], 0, 0, 0, 0, 0, 0, 0));
          const __m512 part = _mm512_zextps256_ps512(_mm256_mul_ps(_mm256_set1_ps(d * s), _mm256_cvtepi32_ps(sums)));
          acc[0][t] = _mm512_add_ps(acc[0][t], part);
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m128 two = _mm_add_ps(minimums[t], _mm_movehl_ps(minimums[t], minimums[t]));
        out[t] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][t], acc[1][t])) +
                 _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two))) + tail[t];
      }
    }
  };
};

}  // namespace cpullm
