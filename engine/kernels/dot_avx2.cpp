// AVX2 + FMA + F16C dot products: the Xeon E5 v4's instruction set and the program's baseline.
// Float rows: four 8-wide FMA accumulators, enough independent chains to cover FMA latency.
// Block rows: int8 x int8 products summed exactly per block with maddubs/madd, then scaled.
#include <immintrin.h>

#include <type_traits>

#include "engine/kernels/dot.hpp"
#include "engine/kernels/int8_rows.hpp"
#include "engine/util/half.hpp"

namespace cpullm {
namespace {

float horizontal_sum(__m256 v) {
  const __m128 four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)));
}

// Eight weights at p, widened to FP32.
inline __m256 load8_f32(const std::byte* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
inline __m256 load8_f16(const std::byte* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256 load8_bf16(const std::byte* p) {
  const __m256i widened = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(widened, 16));
}

// Each 8 weights are widened once for up to 2 tokens (4 accumulators each: 8 of the 16
// registers); 3 or 4 tokens take two passes over the row, the second from L1.
template <std::size_t kElement, __m256 (*Load8)(const std::byte*), float (*Load)(const std::byte*)>
struct FloatRow {
  template <int T>
  struct Kernel {
    static void run(const std::byte* row, const void* const* activations, int64_t cols, float* out) {
      if constexpr (T > 2) {
        Kernel<2>::run(row, activations, cols, out);
        Kernel<T - 2>::run(row, activations + 2, cols, out + 2);
      } else {
        const float* x[T];
        __m256 acc[T][4];
#pragma GCC unroll 2
        for (int t = 0; t < T; ++t) {
          x[t] = static_cast<const float*>(activations[t]);
          for (__m256& a : acc[t]) a = _mm256_setzero_ps();
        }
        int64_t i = 0;
        for (; i + 32 <= cols; i += 32)
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {
            const __m256 w = Load8(row + (i + 8 * k) * kElement);
#pragma GCC unroll 2
            for (int t = 0; t < T; ++t) acc[t][k] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x[t] + i + 8 * k), acc[t][k]);
          }
        for (; i + 8 <= cols; i += 8) {
          const __m256 w = Load8(row + i * kElement);
#pragma GCC unroll 2
          for (int t = 0; t < T; ++t) acc[t][0] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x[t] + i), acc[t][0]);
        }
#pragma GCC unroll 2
        for (int t = 0; t < T; ++t) {
          float sum = horizontal_sum(_mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]), _mm256_add_ps(acc[t][2], acc[t][3])));
          for (int64_t j = i; j < cols; ++j) sum += Load(row + j * kElement) * x[t][j];
          out[t] = sum;
        }
      }
    }
  };
};

// Eight int32 partial sums of w . a over 32 signed bytes, given |w| (magnitudes). maddubs
// multiplies unsigned by signed bytes, so |w| meets a carrying w's sign; pairs stay within
// int16 (2 * 128 * 127).
inline __m256i block_products(__m256i w, __m256i magnitudes, __m256i a) {
  const __m256i pairs = _mm256_maddubs_epi16(magnitudes, _mm256_sign_epi8(a, w));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

// Q4_0 blocks b and b + 1 (when `pair`) in nibble order: lanes 0-3 hold block b's sums, 4-7
// block b + 1's. One load and an AND take the low nibbles of both blocks, a shift and an AND
// the high ones, once for every token; each meets a token's 32 activations in one maddubs (the
// nibbles go in unsigned, as stored), the two int16 products add (at most 4 * 15 * 127 per pair), and each
// block's first lane starts from its zero-point offset. Past the last block everything is zero.
template <int T>
inline void q4_0_pair(const BlockQ4_0* blocks, bool pair, const QuantizedActivations* const* a, int64_t b, __m256 (&acc)[T]) {
  const __m128i first = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[0].nibbles));
  const __m128i second = pair ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[1].nibbles)) : _mm_setzero_si128();
  const __m256i nibbles = _mm256_set_m128i(second, first);
  const __m256i mask = _mm256_set1_epi8(0x0f);
  const __m256i low = _mm256_and_si256(nibbles, mask), high = _mm256_and_si256(_mm256_srli_epi16(nibbles, 4), mask);
  // The two FP16 weight scales, each four times: bytes 0-1 and 18-19 of a 32-byte load,
  // spread within their 128-bit lanes, then the two lanes' low halves joined.
  __m256 weight_scales;
  if (pair) {
    const __m256i head = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks));
    const __m256i spread = _mm256_shuffle_epi8(
        head, _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                               2, 3, 2, 3, 2, 3, 2, 3, -1, -1, -1, -1, -1, -1, -1, -1));
    weight_scales = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(spread, 0b1000)));
  } else {
    weight_scales = _mm256_set1_ps(fp16_to_fp32(blocks[0].scale));  // the upper lanes' sums are zero
  }
  // Blocks b, b + 1 are the first or the second pair of their group of four.
  const int64_t low_offset = (b / 4) * 4 * kQuantBlock + (b % 4) * kQuantBlock / 2;
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const int8_t* low_acts = a[t]->nibble_order + low_offset;
    const int8_t* high_acts = low_acts + 2 * kQuantBlock;
    const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(low, load32_i8(low_acts)),
                                           _mm256_maddubs_epi16(high, load32_i8(high_acts)));
    // The two blocks' offsets into lanes 0 and 4 (the others take source lane 7, zero), their
    // scales over lanes 0-3 and 4-7: 8 bytes each, as stored.
    const __m256i two_offsets = _mm256_zextsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a[t]->offsets + b)));
    const __m256i sums = _mm256_add_epi32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)),
                                          _mm256_permutevar8x32_epi32(two_offsets, _mm256_setr_epi32(0, 7, 7, 7, 1, 7, 7, 7)));
    const __m256 two_scales = _mm256_zextps128_ps256(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(a[t]->scales + b))));
    const __m256 scales = _mm256_mul_ps(weight_scales, _mm256_permutevar8x32_ps(two_scales, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1)));
    acc[t] = _mm256_fmadd_ps(scales, _mm256_cvtepi32_ps(sums), acc[t]);
  }
}

// Two accumulators, for even and odd steps: with one, every step waited on the previous
// step's FMA (4-5 cycles), which cost Q8_0 12% and INT8_CHANNEL 18% of their time with the
// matrix in L2. Each row is still one stream of sequential loads, which the hardware
// prefetcher follows from row to row.
struct Avx2BlockDot {
  template <int T>
  struct Tokens {
    template <typename Row>
    static void run(const Row& w, const QuantizedActivations* const* a, int64_t cols, float* out) {
      const int64_t blocks = cols / kQuantBlock;
      __m256 even[T], odd[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) even[t] = odd[t] = _mm256_setzero_ps();
      if constexpr (std::is_same_v<Row, Q4_0Row>) {
        int64_t b = 0;
        for (; b + 4 <= blocks; b += 4) {
          q4_0_pair<T>(w.blocks + b, true, a, b, even);
          q4_0_pair<T>(w.blocks + b + 2, true, a, b + 2, odd);
        }
        for (; b < blocks; b += 2) q4_0_pair<T>(w.blocks + b, b + 1 < blocks, a, b, even);
      } else {
        const auto step = [&](int64_t b, __m256 (&acc)[T]) {
          const __m256i weights = w.weights(b);
          const __m256i magnitudes = _mm256_sign_epi8(weights, weights);
          const float weight_scale = w.scale(b);
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) {
            const __m256i sums = block_products(weights, magnitudes, load32_i8(a[t]->values + b * kQuantBlock));
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(weight_scale * a[t]->scales[b]), _mm256_cvtepi32_ps(sums), acc[t]);
          }
        };
        int64_t b = 0;
        for (; b + 2 <= blocks; b += 2) step(b, even), step(b + 1, odd);
        if (b < blocks) step(b, even);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) out[t] = horizontal_sum(_mm256_add_ps(even[t], odd[t]));
    }
  };
};
using Avx2IntegerKernels = IntegerRowKernels<Avx2BlockDot>;

}  // namespace

const DotKernels& avx2_dot_kernels() {
  static const DotKernels kernels{by_token_count<FloatRow<4, load8_f32, load_f32>::Kernel>,
                                  by_token_count<FloatRow<2, load8_f16, load_f16>::Kernel>,
                                  by_token_count<FloatRow<2, load8_bf16, load_bf16>::Kernel>, Avx2IntegerKernels::q8_0,
                                  Avx2IntegerKernels::q4_0, Avx2IntegerKernels::int8_channel};
  return kernels;
}

}  // namespace cpullm
