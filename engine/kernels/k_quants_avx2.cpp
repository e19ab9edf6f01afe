// The K-quants' AVX2 row kernels: one step per 256-value super-block, its weights unpacked once
// for every token into 8 registers of 32 bytes, register k meeting activation block k of the
// eight (value order, so the activations load as stored). Per token each register meets its
// activations in one maddubs (pairs of products as int16), and the 8 registers of int16 pairs
// reduce in lanes as Q4_0's do (dot_avx2.cpp): unpacks and int16 adds leave, in `early` for
// blocks 0-3 and `late` for 4-7, two words per block and lane, the lower lane's summing the
// block's values 0-15, the upper lane's its values 16-31: exactly one 16-value sub-block each.
// One madd with the sub-blocks' integer scales as int16 then scales and widens both halves of
// a block at once, so the two sub-blocks of an activation block share one exact int32 sum;
// adding the lanes across leaves block k's sum in lane k. The float work is one conversion,
// a multiply by d and one FMA with the 8 activation scales per token and super-block (the
// minimum's term: one more conversion and FMA), about one float operation per 32 values.
//   Q4_K: q = 0..15 as stored (an AND, or a shift and an AND). Pairs stay within
//     2 * 15 * 127 = 3810, so the 8 inputs a word sums after the cross-lane add stay within
//     int16 (30480) and one madd with the scales serves the whole super-block. The minimum's
//     term, -dmin * m * sum(a), comes from the activation blocks' offsets (-8 * sum(a)).
//   Q5_K: as Q4_K with the fifth bits (bit k of qh, moved to bit 4) ORed in; pairs reach
//     2 * 31 * 127, so early and late each take their madd before the cross-lane add.
//   Q6_K, Q3_K: signed weights q - 32 (-32..31) and q - 4 (-4..3) meet the activations by the
//     sign trick (maddubs of |w| with a carrying w's sign): no per-16 activation sums needed
//     for the zero point. Pairs stay within 2 * 32 * 127 = 8128, so early's and late's words
//     (4 inputs) within int16; a madd each with the int8 scales (Q3_K's unpacked in SIMD
//     registers), then the cross-lane add.
//   Q2_K: q = 0..3 as stored; the minimum's term needs each 16-value sub-block's activation
//     sum, which one more maddubs per block (ones with the activations) gives. Each block's
//     products and sums reduce side by side (the products in the even int32 places, the sums
//     in the odd ones), one madd per two blocks scales them by their sub-blocks' scales and
//     minimums, and two float shuffles part them in block order.
// One accumulator per token: a super-block's step keeps 40 to 80 other operations between its
// FMAs (the block kernels take two where a step is one block, dot_avx2.cpp).
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "engine/kernels/int8_rows.hpp"
#include "engine/kernels/k_quants.hpp"

namespace cpullm {
namespace {

// In-lane reductions of int16 words (dot_avx2.cpp's pair_up and quad_up with int16 adds): four
// registers of maddubs pairs, block k's in p[k] (words 0-7 its values 0-15's, 8-15 its values
// 16-31's), to one whose dword k holds two words summing block k's lower half in the lower
// lane and its upper half in the upper one, each the sum of 4 input words.
inline __m256i pair_up16(__m256i x, __m256i y) { return _mm256_add_epi16(_mm256_unpacklo_epi32(x, y), _mm256_unpackhi_epi32(x, y)); }
inline __m256i quad_up16(__m256i x, __m256i y) { return _mm256_add_epi16(_mm256_unpacklo_epi64(x, y), _mm256_unpackhi_epi64(x, y)); }
inline __m256i four_blocks(const __m256i* p) { return quad_up16(pair_up16(p[0], p[1]), pair_up16(p[2], p[3])); }

// Two registers of int32 lanes whose lanes hold halves of the same sums (lower and upper) to
// one with early's lanes' sums in lanes 0-3 and late's in lanes 4-7.
inline __m256i join_halves(__m256i early, __m256i late) {
  return _mm256_add_epi32(_mm256_permute2x128_si256(early, late, 0x20), _mm256_permute2x128_si256(early, late, 0x31));
}

// Every byte's bit `from` shifted to bit `to` (16-bit shifts: bits crossing into the next
// byte land elsewhere than bit `to`), and the same with the other bits cleared.
inline __m256i bit_at(__m256i bytes, int from, int to) {
  return from < to ? _mm256_slli_epi16(bytes, to - from) : from > to ? _mm256_srli_epi16(bytes, from - to) : bytes;
}
inline __m256i move_bit(__m256i bytes, int from, int to) {
  return _mm256_and_si256(bit_at(bytes, from, to), _mm256_set1_epi8(static_cast<char>(1 << to)));
}

// The products of 32 signed weights w with 32 activations, given |w|: int16 pairs (sign trick).
inline __m256i signed_pairs(__m256i w, __m256i magnitudes, __m256i a) { return _mm256_maddubs_epi16(magnitudes, _mm256_sign_epi8(a, w)); }

// Sixteen int8 scales, sub-block j's in byte j, as the multipliers of early's and late's words:
// lower lane sub-blocks 2k (k = 0..3 for early, 4..7 for late), upper lane 2k + 1, each twice.
inline void sixteen_scale_words(__m128i scales, __m256i& early, __m256i& late) {
  const __m128i order = _mm_setr_epi8(0, 0, 2, 2, 4, 4, 6, 6, 1, 1, 3, 3, 5, 5, 7, 7);
  early = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, order));
  late = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, _mm_add_epi8(order, _mm_set1_epi8(8))));
}

// Q4_K and Q5_K: block k is sub-block k, its values in chunk k / 2's low (even k) or high
// (odd k) nibbles.
template <typename Block>
struct Q45K {
  static constexpr bool kFifthBit = std::is_same_v<Block, BlockQ5_K>;
  __m256i q[8];
  __m256i scale_words;      // Q4_K: words 2k and 2k + 1 block k's scale; Q5_K: early's multipliers (scale k < 4, both lanes)
  __m256i late_words;       // Q5_K: late's multipliers (scale k + 4 in words 2k and 2k + 1 of both lanes)
  __m256 d, minimum_terms;  // minimum_terms: lane k, m_k * dmin / 8, the factor of block k's offset

  [[gnu::always_inline]] explicit Q45K(const Block& block) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    [[maybe_unused]] __m256i high_bits;
    if constexpr (kFifthBit) high_bits = load32_i8(block.qh);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i packed = load32_i8(block.qs + 32 * c);
      q[2 * c] = _mm256_and_si256(packed, low4);
      q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4);
      if constexpr (kFifthBit) {
        q[2 * c] = _mm256_or_si256(q[2 * c], move_bit(high_bits, 2 * c, 4));
        q[2 * c + 1] = _mm256_or_si256(q[2 * c + 1], move_bit(high_bits, 2 * c + 1, 4));
      }
    }
    const __m128i scales = scales_and_minimums_k4(block.scales), minimums = _mm_srli_si128(scales, 8);
    const __m128i doubled = _mm_unpacklo_epi8(scales, scales);  // scale k in bytes 2k and 2k + 1
    if constexpr (kFifthBit) {
      scale_words = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(doubled));
      late_words = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_srli_si128(doubled, 8)));
    } else {
      scale_words = _mm256_cvtepu8_epi16(doubled);
    }
    d = _mm256_set1_ps(fp16_to_fp32(block.d));
    minimum_terms = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(minimums)), _mm256_set1_ps(fp16_to_fp32(block.dmin) * 0.125f));
  }

  [[gnu::always_inline]] __m256 add_to(const QuantizedActivations& a, int64_t b, __m256 acc) const {
    const int8_t* x = a.values + b * kQuantBlock;
    __m256i pairs[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) pairs[k] = _mm256_maddubs_epi16(q[k], load32_i8(x + k * kQuantBlock));
    const __m256i early = four_blocks(pairs), late = four_blocks(pairs + 4);
    __m256i sums;
    if constexpr (kFifthBit) {
      sums = join_halves(_mm256_madd_epi16(early, scale_words), _mm256_madd_epi16(late, late_words));
    } else {
      const __m256i joined = _mm256_add_epi16(_mm256_permute2x128_si256(early, late, 0x20), _mm256_permute2x128_si256(early, late, 0x31));
      sums = _mm256_madd_epi16(joined, scale_words);
    }
    const __m256i offsets = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.block_offsets + b));
    const __m256 blocks = _mm256_fmadd_ps(minimum_terms, _mm256_cvtepi32_ps(offsets), _mm256_mul_ps(d, _mm256_cvtepi32_ps(sums)));
    return _mm256_fmadd_ps(_mm256_loadu_ps(a.scales + b), blocks, acc);
  }
};

// Q6_K's and Q3_K's view: the 256 weights as signed bytes (block k's in w[k], with their
// magnitudes for maddubs) and 16 signed sub-block scales as madd words; no minimums.
struct SignedSixteen {
  __m256i w[8], magnitudes[8];
  __m256i early_words, late_words;
  __m256 d;

  [[gnu::always_inline]] __m256 add_to(const QuantizedActivations& a, int64_t b, __m256 acc) const {
    const int8_t* x = a.values + b * kQuantBlock;
    __m256i pairs[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) pairs[k] = signed_pairs(w[k], magnitudes[k], load32_i8(x + k * kQuantBlock));
    const __m256i sums = join_halves(_mm256_madd_epi16(four_blocks(pairs), early_words), _mm256_madd_epi16(four_blocks(pairs + 4), late_words));
    return _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_loadu_ps(a.scales + b)), _mm256_cvtepi32_ps(sums), acc);
  }
};

// Q6_K: block k = 4h + j is value 32j + l of half h: the low nibble of ql's half's byte
// 32 * (j % 2) + l (the high one for j >= 2), and bits 2j, 2j + 1 of qh's half's byte l.
struct Q6K : SignedSixteen {
  [[gnu::always_inline]] explicit Q6K(const BlockQ6_K& block) {
    const __m256i low4 = _mm256_set1_epi8(0x0f), high2 = _mm256_set1_epi8(0x30), zero_point = _mm256_set1_epi8(32);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i first = load32_i8(block.ql + 64 * h), second = load32_i8(block.ql + 64 * h + 32);
      const __m256i high = load32_i8(block.qh + 32 * h);
      __m256i* half = w + 4 * h;
      half[0] = _mm256_or_si256(_mm256_and_si256(first, low4), _mm256_and_si256(_mm256_slli_epi16(high, 4), high2));
      half[1] = _mm256_or_si256(_mm256_and_si256(second, low4), _mm256_and_si256(_mm256_slli_epi16(high, 2), high2));
      half[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(first, 4), low4), _mm256_and_si256(high, high2));
      half[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(second, 4), low4), _mm256_and_si256(_mm256_srli_epi16(high, 2), high2));
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) w[k] = _mm256_sub_epi8(w[k], zero_point), magnitudes[k] = _mm256_abs_epi8(w[k]);
    sixteen_scale_words(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales)), early_words, late_words);
    d = _mm256_set1_ps(fp16_to_fp32(block.d));
  }
};

// Q3_K: block k = 4h + j is value 32j + l of half h: bits 2j, 2j + 1 of qs's half's byte l,
// the third bit bit k of hmask[l] (set: q as is; clear: q - 4).
struct Q3K : SignedSixteen {
  // The 16 scales (q3_k_scales): sub-block j's low 4 bits are byte j's low nibble (j < 8) or
  // byte j - 8's high one, its top 2 bits those at 2 * (j / 4) of byte 8 + j % 4; less 32.
  static __m128i scales(const uint8_t* packed) {
    int64_t low_bytes;
    int32_t high_bytes;
    std::memcpy(&low_bytes, packed, 8);
    std::memcpy(&high_bytes, packed + 8, 4);
    const __m128i low = _mm_cvtsi64_si128(low_bytes);
    const __m128i nibbles = _mm_and_si128(_mm_unpacklo_epi64(low, _mm_srli_epi16(low, 4)), _mm_set1_epi8(0x0f));
    const __m128i tops = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(high_bytes), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    return _mm_sub_epi8(_mm_or_si128(nibbles, _mm_slli_epi16(tops, 4)), _mm_set1_epi8(32));
  }

  [[gnu::always_inline]] explicit Q3K(const BlockQ3_K& block) {
    const __m256i low2 = _mm256_set1_epi8(3), zero_point = _mm256_set1_epi8(4);
    const __m256i third_bits = load32_i8(block.hmask);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i packed = load32_i8(block.qs + 32 * h);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const int k = 4 * h + j;
        const __m256i low = _mm256_and_si256(_mm256_srli_epi16(packed, 2 * j), low2);
        // Less 4 where the third bit is clear: bit k at bit 2, ANDNOT 4.
        w[k] = _mm256_sub_epi8(low, _mm256_andnot_si256(bit_at(third_bits, k, 2), zero_point));
        magnitudes[k] = _mm256_abs_epi8(w[k]);
      }
    }
    sixteen_scale_words(scales(block.scales), early_words, late_words);
    d = _mm256_set1_ps(fp16_to_fp32(block.d));
  }
};

// Q2_K: block k = 4h + j is value 32j + l of half h: bits 2j, 2j + 1 of qs's half's byte l.
// Per pair of blocks r (2r, 2r + 1) the products P and activation sums S reduce to, in the
// lower lane, [P, S] of sub-block 4r, then of 4r + 2, in the upper [P, S] of 4r + 1 and 4r + 3,
// so the madd's multipliers are, in that order, each sub-block's scale and minimum twice.
struct Q2K {
  __m256i q[8];
  __m256i multipliers[4];  // pair r's
  __m256 d, dmin;

  [[gnu::always_inline]] explicit Q2K(const BlockQ2_K& block) {
    const __m256i low2 = _mm256_set1_epi8(3);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i packed = load32_i8(block.qs + 32 * h);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) q[4 * h + j] = _mm256_and_si256(_mm256_srli_epi16(packed, 2 * j), low2);
    }
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales)), low4 = _mm_set1_epi8(0x0f);
    const __m128i scales = _mm_and_si128(packed, low4), minimums = _mm_and_si128(_mm_srli_epi16(packed, 4), low4);
    // Sub-block j's scale and minimum in bytes 2j and 2j + 1 of first (j < 8) or second.
    const __m128i first = _mm_unpacklo_epi8(scales, minimums), second = _mm_unpackhi_epi8(scales, minimums);
    const __m128i order = _mm_setr_epi8(0, 0, 1, 1, 4, 4, 5, 5, 2, 2, 3, 3, 6, 6, 7, 7), next = _mm_add_epi8(order, _mm_set1_epi8(8));
    multipliers[0] = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(first, order));
    multipliers[1] = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(first, next));
    multipliers[2] = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(second, order));
    multipliers[3] = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(second, next));
    d = _mm256_set1_ps(fp16_to_fp32(block.d));
    dmin = _mm256_set1_ps(fp16_to_fp32(block.dmin));
  }

  [[gnu::always_inline]] __m256 add_to(const QuantizedActivations& a, int64_t b, __m256 acc) const {
    const int8_t* x = a.values + b * kQuantBlock;
    const __m256i ones = _mm256_set1_epi8(1);
    __m256i scaled[4];  // pair r: int32 [P, S, P, S] per lane, scaled by the multipliers
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      __m256i both[2];
#pragma GCC unroll 2
      for (int e = 0; e < 2; ++e) {
        const __m256i values = load32_i8(x + (2 * r + e) * kQuantBlock);
        both[e] = pair_up16(_mm256_maddubs_epi16(q[2 * r + e], values), _mm256_maddubs_epi16(ones, values));
      }
      scaled[r] = _mm256_madd_epi16(quad_up16(both[0], both[1]), multipliers[r]);
    }
    // [P0 S0 P1 S1 | P4 S4 P5 S5] and [P2 S2 P3 S3 | P6 S6 P7 S7], then the even and odd places.
    const __m256 low = _mm256_cvtepi32_ps(join_halves(scaled[0], scaled[2]));
    const __m256 high = _mm256_cvtepi32_ps(join_halves(scaled[1], scaled[3]));
    const __m256 products = _mm256_shuffle_ps(low, high, _MM_SHUFFLE(2, 0, 2, 0));
    const __m256 minimums = _mm256_shuffle_ps(low, high, _MM_SHUFFLE(3, 1, 3, 1));
    const __m256 blocks = _mm256_fmsub_ps(d, products, _mm256_mul_ps(dmin, minimums));
    return _mm256_fmadd_ps(_mm256_loadu_ps(a.scales + b), blocks, acc);
  }
};

// A format's super-block view (Q45K, Q6K, Q3K, Q2K), built once per super-block for all T tokens
// (always inlined: GCC kept the larger constructors out of line, their registers passing through
// memory).
template <typename Unpacked, typename Block>
struct SuperBlocks {
  template <int T>
  struct Kernel {
    static void run(const std::byte* row, const void* const* activations, int64_t cols, float* out) {
      const auto* blocks = reinterpret_cast<const Block*>(row);
      const auto* const* a = reinterpret_cast<const QuantizedActivations* const*>(activations);
      __m256 acc[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
      for (int64_t i = 0; i < cols / kSuperBlock; ++i) {
        prefetch_lines(blocks + i);
        const Unpacked unpacked(blocks[i]);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) acc[t] = unpacked.add_to(*a[t], i * (kSuperBlock / kQuantBlock), acc[t]);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) out[t] = horizontal_sum(acc[t]);
    }
  };
};

}  // namespace

namespace avx2_dot {
const RowDot q2_k = by_token_count<SuperBlocks<Q2K, BlockQ2_K>::Kernel>;
const RowDot q3_k = by_token_count<SuperBlocks<Q3K, BlockQ3_K>::Kernel>;
const RowDot q4_k = by_token_count<SuperBlocks<Q45K<BlockQ4_K>, BlockQ4_K>::Kernel>;
const RowDot q5_k = by_token_count<SuperBlocks<Q45K<BlockQ5_K>, BlockQ5_K>::Kernel>;
const RowDot q6_k = by_token_count<SuperBlocks<Q6K, BlockQ6_K>::Kernel>;
}

}  // namespace cpullm
