// The K-quants' AVX-512 row kernels for the types llama.cpp's _M and _S files are made of (Q4_K,
// Q5_K, Q6_K). A super-block is unpacked once for every token into 4 registers of 64 bytes,
// register c holding activation blocks 2c and 2c + 1 (value order, so the activations load as
// stored, 64 bytes at once). Per token each register meets its activations in one vpdpbusd, whose
// int32 lanes are exact partial sums of one sub-block each (lanes 0-7 block 2c's values, 8-15
// block 2c + 1's; with 16-value sub-blocks, lanes 4j..4j + 3 sub-block 4c + j's). One float
// multiplier per lane then carries everything that scales it: the sub-block's integer scale
// times the super-block's d, built once per super-block, times the activation block's scale,
// one permute and one multiply per register and token. So the float work is one conversion and
// one FMA per 64 values, where the AVX2 kernels (k_quants_avx2.cpp) spend about 9 shuffles and
// adds per 256 values to bring int16 pairs to per-sub-block sums first.
//   Q4_K: q = 0..15 as stored: chunk c's 32 bytes broadcast to both halves of a register, its
//     upper half shifted right by 4, one AND: the low nibbles (sub-block 2c) below, the high ones
//     (2c + 1) above. The minimum's term, -dmin * m * sum(a), comes from the activation blocks'
//     offsets (-8 * sum(a)): one masked FMA per token and super-block.
//   Q5_K: as Q4_K with the fifth bits (bit k of qh for sub-block k) rotated to bit 4 and ORed in.
//   Q6_K: signed weights q - 32 meet the activations + 128 (values_biased), as Q8_0's do
//     (dot.hpp): each lane starts from -128 * the sum of its 4 weights, computed once for all the
//     tokens.
// Q2_K and Q3_K, which no _M or _S mixture's bulk uses, run the AVX2 kernels at this level.
// As dot_avx512.cpp: only the functions below the target pragma use AVX-512, and they run only
// after cpu_supports(Isa::Avx512).
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "engine/kernels/int8_rows.hpp"
#include "engine/kernels/k_quants.hpp"

// GCC 12's headers leave the upper half of a 128/256-to-512-bit cast undefined on purpose and
// then warn about it (GCC bug 105593); the upper halves here are never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni")

namespace cpullm {
namespace {

// 32 bytes in both halves of a register (a broadcast from memory: a load, no shuffle).
inline __m512i broadcast32_i8(const uint8_t* p) { return _mm512_broadcast_i64x4(load32_i8(p)); }

// Lanes 0-7 of the register from lane `first` of x, lanes 8-15 from lane `first` + 1: a pair of
// activation blocks' factors spread over their blocks' lanes.
inline __m512 spread_pair(__m512 x, int first) {
  return _mm512_permutexvar_ps(_mm512_set_epi32(first + 1, first + 1, first + 1, first + 1, first + 1, first + 1, first + 1,
                                                first + 1, first, first, first, first, first, first, first, first),
                               x);
}

template <typename Block>
struct Q45K {
  static constexpr bool kFifthBit = std::is_same_v<Block, BlockQ5_K>;
  __m512i q[4];    // register c: sub-block 2c's values in bytes 0-31, 2c + 1's in 32-63
  __m512 factors;  // lane k < 8: d * scale k; lane 8 + k: dmin * minimum k / 8, the factor of block k's offset

  [[gnu::always_inline]] explicit Q45K(const Block& block) {
    const __m512i halves = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0), low4 = _mm512_set1_epi8(0x0f);
    [[maybe_unused]] __m512i high_bits;
    if constexpr (kFifthBit) high_bits = broadcast32_i8(block.qh);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      q[c] = _mm512_and_si512(_mm512_srlv_epi64(broadcast32_i8(block.qs + 32 * c), halves), low4);
      if constexpr (kFifthBit) {
        // Bit 2c (lower half) and 2c + 1 (upper) of each byte to bit 4: a 64-bit rotate left by
        // 4 - 2c and 3 - 2c (-3..4, so bit 4 of every byte comes from the same byte).
        const int64_t upper = (3 - 2 * c) & 63, lower = (4 - 2 * c) & 63;
        const __m512i by = _mm512_set_epi64(upper, upper, upper, upper, lower, lower, lower, lower);
        const __m512i fifth = _mm512_and_si512(_mm512_rolv_epi64(high_bits, by), _mm512_set1_epi8(0x10));
        q[c] = _mm512_or_si512(q[c], fifth);
      }
    }
    const __m512 integers = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(scales_and_minimums_k4(block.scales)));  // scales in lanes 0-7, minimums in 8-15
    // d and dmin are the block's first 4 bytes: [d, dmin / 8] spread over lanes 0-7 and 8-15.
    int32_t both;
    std::memcpy(&both, &block.d, sizeof(both));
    const __m128 d_dmin = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(both)), _mm_setr_ps(1.0f, 0.125f, 0.0f, 0.0f));
    factors = _mm512_mul_ps(integers, spread_pair(_mm512_castps128_ps512(d_dmin), 0));
  }

  [[gnu::always_inline]] __m512 add_to(const QuantizedActivations& a, int64_t b, __m512 acc) const {
    const int8_t* x = a.values + b * kQuantBlock;
    // Each block's scale in lanes k and 8 + k: the multipliers below, the minimums' factors above.
    const __m512 scales = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd(reinterpret_cast<const double*>(a.scales + b))));
    const __m512 multipliers = _mm512_mul_ps(factors, scales);
    const __m512 offsets = _mm512_cvtepi32_ps(_mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.block_offsets + b))));
    __m512 terms[2] = {_mm512_maskz_mul_ps(0xff00, multipliers, offsets), _mm512_setzero_ps()};
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[c], _mm512_loadu_si512(x + 64 * c));
      terms[c % 2] = _mm512_fmadd_ps(spread_pair(multipliers, 2 * c), _mm512_cvtepi32_ps(sums), terms[c % 2]);
    }
    return _mm512_add_ps(acc, _mm512_add_ps(terms[0], terms[1]));
  }
};

// Q6_K: block k = 4h + j is value 32j + l of half h: the low nibble of ql's half's byte
// 32 * (j % 2) + l (the high one for j >= 2), and bits 2j, 2j + 1 of qh's half's byte l. So
// register 2h holds blocks 4h and 4h + 1 (ql's half's 64 bytes, low nibbles; qh's 32 bytes
// shifted left by 4 and 2), register 2h + 1 blocks 4h + 2 and 4h + 3 (high nibbles; qh shifted
// right by 0 and 2).
struct Q6K {
  __m512i w[4];       // register c: q - 32, blocks 2c and 2c + 1
  __m512i starts[4];  // register c: each lane's -128 * the sum of its 4 weights
  __m512 factors[4];  // register c: d * the scale of lane j's sub-block, 4c + j / 4

  [[gnu::always_inline]] explicit Q6K(const BlockQ6_K& block) {
    const __m512i low4 = _mm512_set1_epi8(0x0f), six = _mm512_set1_epi8(0x3f), zero_point = _mm512_set1_epi8(32);
    constexpr int kLowFromFirst = 0xe4;  // ternary logic: the third operand's set bits pick the first's, the rest the second's
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i low = _mm512_loadu_si512(block.ql + 64 * h);
      const __m512i high = broadcast32_i8(block.qh + 32 * h);
      const __m512i first = _mm512_sllv_epi64(high, _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4));
      const __m512i second = _mm512_srlv_epi64(high, _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0));
      w[2 * h] = _mm512_and_si512(_mm512_ternarylogic_epi32(low, first, low4, kLowFromFirst), six);
      w[2 * h + 1] = _mm512_and_si512(_mm512_ternarylogic_epi32(_mm512_srli_epi16(low, 4), second, low4, kLowFromFirst), six);
    }
    const __m512 scales = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales)))),
                                        _mm512_set1_ps(fp16_to_fp32(block.d)));
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      w[c] = _mm512_sub_epi8(w[c], zero_point);
      starts[c] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, w[c]));
      const int s = 4 * c;
      factors[c] = _mm512_permutexvar_ps(_mm512_set_epi32(s + 3, s + 3, s + 3, s + 3, s + 2, s + 2, s + 2, s + 2, s + 1, s + 1, s + 1, s + 1, s, s, s, s), scales);
    }
  }

  [[gnu::always_inline]] __m512 add_to(const QuantizedActivations& a, int64_t b, __m512 acc) const {
    const uint8_t* x = a.values_biased + b * kQuantBlock;
    const __m512 scales = _mm512_castps256_ps512(_mm256_loadu_ps(a.scales + b));
    __m512 terms[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i sums = _mm512_dpbusd_epi32(starts[c], _mm512_loadu_si512(x + 64 * c), w[c]);
      terms[c % 2] = _mm512_fmadd_ps(_mm512_mul_ps(factors[c], spread_pair(scales, 2 * c)), _mm512_cvtepi32_ps(sums), terms[c % 2]);
    }
    return _mm512_add_ps(acc, _mm512_add_ps(terms[0], terms[1]));
  }
};

// A format's super-block view, built once per super-block for all T tokens.
template <typename Unpacked, typename Block>
struct SuperBlocks {
  template <int T>
  struct Kernel {
    static void run(const std::byte* row, const void* const* activations, int64_t cols, float* out) {
      const auto* blocks = reinterpret_cast<const Block*>(row);
      const auto* const* a = reinterpret_cast<const QuantizedActivations* const*>(activations);
      __m512 acc[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
      for (int64_t i = 0; i < cols / kSuperBlock; ++i) {
        prefetch_lines(blocks + i);
        const Unpacked unpacked(blocks[i]);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) acc[t] = unpacked.add_to(*a[t], i * (kSuperBlock / kQuantBlock), acc[t]);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
    }
  };
};

}  // namespace

namespace avx512_dot {
const RowDot q4_k = by_token_count<SuperBlocks<Q45K<BlockQ4_K>, BlockQ4_K>::Kernel>;
const RowDot q5_k = by_token_count<SuperBlocks<Q45K<BlockQ5_K>, BlockQ5_K>::Kernel>;
const RowDot q6_k = by_token_count<SuperBlocks<Q6K, BlockQ6_K>::Kernel>;
}

}  // namespace cpullm

#pragma GCC pop_options
