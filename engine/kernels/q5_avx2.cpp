// Q5_0's and Q5_1's AVX2 row kernels, eight blocks a step. Per block one 16-byte load gives
// the 32 low nibbles in value order (low nibbles, then the high ones shifted down, as Q4_1's),
// and the 32-bit mask its fifth bits: broadcast, each byte j of the register takes mask byte
// j / 8 (one shuffle), then a compare against its own bit j % 8 and an AND give 16 where the
// bit is set. The values q = 0..31 go in unsigned, as Q4_1's nibbles: per token one maddubs a
// block (pairs at most 2 * 31 * 127 = 7874), and the eight blocks' int16 pairs reduce in lanes
// as the K-quants' do (k_quants_avx2.cpp): four blocks to a register whose words stay within
// int16 (31496); a madd each widens them, and one cross-lane add leaves block k's exact
// sum(q * a) in lane k. Then, per token and step, the zero point and minimum come from the eight
// blocks' offsets (-8 * sum(a)):
//   Q5_0: w.a = sum(q * a) - 16 * sum(a) = sum(q * a) + 2 * offset, exact in int32; one
//         conversion, a multiply of the 8 weight scales by the 8 activation scales, one FMA.
//   Q5_1: w.x = s * (d * sum(q * a) + m * sum(a)), sum(a) = offset / -8: two conversions,
//         two FMAs and a multiply.
// The weight scales (and minimums) of the eight blocks are gathered once for every token from
// 4-byte loads at the blocks' starts. One accumulator per token for the steps (each keeps some
// 30 operations between its FMAs, as dot_avx2.cpp's eight-block steps); a row's last blocks,
// fewer than 8, are copied beside zero blocks (zero scales) and take one more step, which the
// activations' padding (dot.hpp) lets read 8 blocks.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "engine/kernels/int8_rows.hpp"
#include "engine/kernels/q5.hpp"

namespace cpullm {
namespace {

// In-lane int16 reductions, as k_quants_avx2.cpp's: four blocks' maddubs pairs (p[k]) to one
// register whose dword k holds two words summing block k's values 0-15 (lower lane) or 16-31
// (upper lane).
inline __m256i pair_up16(__m256i x, __m256i y) { return _mm256_add_epi16(_mm256_unpacklo_epi32(x, y), _mm256_unpackhi_epi32(x, y)); }
inline __m256i quad_up16(__m256i x, __m256i y) { return _mm256_add_epi16(_mm256_unpacklo_epi64(x, y), _mm256_unpackhi_epi64(x, y)); }
inline __m256i four_blocks(const __m256i* p) { return quad_up16(pair_up16(p[0], p[1]), pair_up16(p[2], p[3])); }

// A block's 32 values q (0..31) in value order, one per byte.
template <typename Block>
[[gnu::always_inline]] inline __m256i five_bit_values(const Block& block) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.nibbles));
  const __m128i low4 = _mm_set1_epi8(0x0f);
  const __m256i nibbles = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), low4), _mm_and_si128(packed, low4));
  int32_t mask;
  std::memcpy(&mask, block.high_bits, 4);
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(mask), _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                                                   2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);  // byte j: bit j % 8
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_or_si256(nibbles, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
}

// The 16-bit words at bytes 0 and 2 of blocks[0..7] (Q5_1: d and m; Q5_0: d and half its mask),
// as 8 words each: the 4-byte heads gathered four to 128 bits, then split into low and high words.
template <typename Block>
[[gnu::always_inline]] inline void heads8(const Block* blocks, __m128i& first, __m128i& second) {
  const auto head = [&](int j) {
    int32_t four;
    std::memcpy(&four, blocks + j, 4);
    return _mm_cvtsi32_si128(four);
  };
  const auto four = [&](int j) {
    return _mm_unpacklo_epi64(_mm_unpacklo_epi32(head(j), head(j + 1)), _mm_unpacklo_epi32(head(j + 2), head(j + 3)));
  };
  const __m128i split = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  const __m128i early = _mm_shuffle_epi8(four(0), split), late = _mm_shuffle_epi8(four(4), split);
  first = _mm_unpacklo_epi64(early, late);
  second = _mm_unpackhi_epi64(early, late);
}

template <typename Block>
struct Q5Kernel {
  static constexpr bool kMinimum = std::is_same_v<Block, BlockQ5_1>;

  // Blocks b..b+7 of the row (at `blocks`) for every token (always inlined: GCC kept it out of
  // line for 3 and 4 tokens).
  template <int T>
  [[gnu::always_inline]] static void step(const Block* blocks, const QuantizedActivations* const* a, int64_t b, __m256 (&acc)[T]) {
    __m256i q[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) q[k] = five_bit_values(blocks[k]);
    __m128i scale_words, minimum_words;
    heads8(blocks, scale_words, minimum_words);
    const __m256 weight_scales = _mm256_cvtph_ps(scale_words);
    [[maybe_unused]] __m256 minimums;  // Q5_1: m / -8, the factor of each block's offset
    if constexpr (kMinimum) minimums = _mm256_mul_ps(_mm256_cvtph_ps(minimum_words), _mm256_set1_ps(-0.125f));
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const int8_t* x = a[t]->values + b * kQuantBlock;
      __m256i pairs[8];
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) pairs[k] = _mm256_maddubs_epi16(q[k], load32_i8(x + k * kQuantBlock));
      const __m256i early = _mm256_madd_epi16(four_blocks(pairs), ones), late = _mm256_madd_epi16(four_blocks(pairs + 4), ones);
      const __m256i sums = _mm256_add_epi32(_mm256_permute2x128_si256(early, late, 0x20), _mm256_permute2x128_si256(early, late, 0x31));
      const __m256i offsets = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t]->block_offsets + b));
      const __m256 activation_scales = _mm256_loadu_ps(a[t]->scales + b);
      if constexpr (kMinimum) {
        const __m256 per_block = _mm256_fmadd_ps(weight_scales, _mm256_cvtepi32_ps(sums), _mm256_mul_ps(minimums, _mm256_cvtepi32_ps(offsets)));
        acc[t] = _mm256_fmadd_ps(activation_scales, per_block, acc[t]);
      } else {
        const __m256i exact = _mm256_add_epi32(sums, _mm256_slli_epi32(offsets, 1));
        acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(weight_scales, activation_scales), _mm256_cvtepi32_ps(exact), acc[t]);
      }
    }
  }

  template <int T>
  struct Kernel {
    static void run(const std::byte* row, const void* const* activations, int64_t cols, float* out) {
      const auto* blocks = reinterpret_cast<const Block*>(row);
      const auto* const* a = reinterpret_cast<const QuantizedActivations* const*>(activations);
      const int64_t count = cols / kQuantBlock;
      __m256 acc[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
      int64_t b = 0;
      for (; b + 8 <= count; b += 8) {
        // Prefetches 64 bytes apart from the step's start (176 or 192 bytes) reach every line.
        for (int64_t at = 0; at < static_cast<int64_t>(8 * sizeof(Block)); at += 64)
          prefetch_ahead(reinterpret_cast<const std::byte*>(blocks + b) + at);
        step<T>(blocks + b, a, b, acc);
      }
      if (b < count) {
        Block tail[8] = {};
        std::copy(blocks + b, blocks + count, tail);
        step<T>(tail, a, b, acc);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) out[t] = horizontal_sum(acc[t]);
    }
  };
};

}  // namespace

namespace avx2_dot {
const RowDot q5_0 = by_token_count<Q5Kernel<BlockQ5_0>::Kernel>;
const RowDot q5_1 = by_token_count<Q5Kernel<BlockQ5_1>::Kernel>;
}

}  // namespace cpullm
