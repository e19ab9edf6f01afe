// AVX-512 (F, BW, VL) + VNNI dot products, for the hosts that have them (Ice Lake, Zen 4/5).
// The program's baseline is AVX2: only the functions below this file's target pragma use
// AVX-512, and they run only after cpu_supports(Isa::Avx512). Nothing from the standard
// library is instantiated under the pragma, so no AVX-512 copy of a shared inline function can
// leak into baseline code. The row views (int8_rows.hpp) are included before the pragma: they
// are baseline functions, inlined here.
#include <immintrin.h>

#include <type_traits>

#include "engine/kernels/dot.hpp"
#include "engine/kernels/int8_rows.hpp"

// GCC 12's headers leave the upper half of a 256-to-512-bit cast undefined on purpose and
// then warn about it (GCC bug 105593); the upper halves here are always written or unused.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni")

namespace cpullm {
namespace {

inline __m512 load16_f32(const std::byte* p) { return _mm512_loadu_ps(reinterpret_cast<const float*>(p)); }
inline __m512 load16_f16(const std::byte* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load16_bf16(const std::byte* p) {
  const __m512i widened = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(widened, 16));
}

// Four 16-wide FMA accumulators per token; each 16 weights are widened once for all T tokens;
// the last cols % 16 elements go through the scalar loads.
template <int kElement, __m512 (*Load16)(const std::byte*), float (*Load)(const std::byte*)>
struct FloatRow {
  template <int T>
  struct Kernel {
    static void run(const std::byte* row, const void* const* activations, int64_t cols, float* out) {
      const float* x[T];
      __m512 acc[T][4];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        x[t] = static_cast<const float*>(activations[t]);
        for (__m512& a : acc[t]) a = _mm512_setzero_ps();
      }
      int64_t i = 0;
      for (; i + 64 <= cols; i += 64) {
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) {
          const __m512 w = Load16(row + (i + 16 * u) * kElement);
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) acc[t][u] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x[t] + i + 16 * u), acc[t][u]);
        }
      }
      for (; i + 16 <= cols; i += 16) {
        const __m512 w = Load16(row + i * kElement);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) acc[t][0] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x[t] + i), acc[t][0]);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), _mm512_add_ps(acc[t][2], acc[t][3])));
        for (int64_t j = i; j < cols; ++j) sum += Load(row + j * kElement) * x[t][j];
        out[t] = sum;
      }
    }
  };
};

// Q8_0 and INT8_CHANNEL, two blocks per register in natural order (natural_sixteen's steps, and
// natural_pair for a row's last blocks): lanes 0-7 hold block b's sums, lanes 8-15 block b + 1's.
// The weights go into vpdpbusd's signed side as stored and meet the activations + 128 (dot.hpp);
// each lane starts from -128 * the sum of its 4 weights, computed once for all the tokens. When
// `pair` is false block b is the row's last: the upper half's weights are zero, and so are its
// products and its activation scale.
inline __m512i pair_weights(const Q8_0Row& w, int64_t b, bool pair) {
  const __m512i first = _mm512_zextsi256_si512(load32_i8(w.blocks[b].q));
  return pair ? _mm512_inserti64x4(first, load32_i8(w.blocks[b + 1].q), 1) : first;
}
inline __m512i pair_weights(const Iq4NlRow& w, int64_t b, bool pair) {
  const __m512i first = _mm512_zextsi256_si512(w.weights(b));
  return pair ? _mm512_inserti64x4(first, w.weights(b + 1), 1) : first;
}
// Two 32-byte loads, not one of 64: a row's values start 4 bytes after its scale, so every
// 64-byte load would straddle two cache lines (40% slower on a 4096 x 4096 matrix).
inline __m512i pair_weights(const Int8ChannelRow& w, int64_t b, bool pair) {
  const __m512i first = _mm512_zextsi256_si512(load32_i8(w.values + b * kQuantBlock));
  return pair ? _mm512_inserti64x4(first, load32_i8(w.values + (b + 1) * kQuantBlock), 1) : first;
}
// The weight scale of every lane: a full pair's two FP16 scales are words 0 and 17 of the 64
// bytes from block b's start.
inline __m512 pair_scales(const Q8_0Row& w, int64_t b, bool pair) {
  if (!pair) return _mm512_set1_ps(w.scale(b));
  const __m512i head = _mm512_loadu_si512(w.blocks + b);
  const __m512i lanes = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                         17, 17, 17, 17, 17, 17, 17, 17, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(lanes, head)));
}
inline __m512 pair_scales(const Int8ChannelRow& w, int64_t, bool) { return _mm512_set1_ps(w.row_scale); }
inline __m512 pair_scales(const Iq4NlRow& w, int64_t b, bool pair) {
  const __m256 first = _mm256_set1_ps(w.scale(b)), second = _mm256_set1_ps(pair ? w.scale(b + 1) : 0.0f);
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(first)), _mm256_castps_pd(second), 1));
}

template <int T, typename Row>
inline void natural_pair(const Row& w, int64_t b, bool pair, const QuantizedActivations* const* a, __m512 (&acc)[T]) {
  prefetch_ahead(w.address(b));
  const __m512i weights = pair_weights(w, b, pair);
  const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(),
                                         _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(static_cast<char>(0x80)), weights));
  const __m512 weight_scales = pair_scales(w, b, pair);
  // Each token's two block scales, read as stored (8 bytes) and spread over their blocks' lanes.
  const __m512i spread = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const __m512i sums = _mm512_dpbusd_epi32(start, _mm512_loadu_si512(a[t]->values_biased + b * kQuantBlock), weights);
    const __m128 two = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(a[t]->scales + b)));
    const __m512 scales = _mm512_mul_ps(weight_scales, _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(two)));
    acc[t] = _mm512_fmadd_ps(scales, _mm512_cvtepi32_ps(sums), acc[t]);
  }
}

// In-lane unpacks, as dot_avx2.cpp's pair_up and quad_up, in each 128-bit lane of 512 bits.
inline __m512i pair_up(__m512i x, __m512i y) { return _mm512_add_epi32(_mm512_unpacklo_epi32(x, y), _mm512_unpackhi_epi32(x, y)); }
inline __m512i quad_up(__m512i x, __m512i y) { return _mm512_add_epi32(_mm512_unpacklo_epi64(x, y), _mm512_unpackhi_epi64(x, y)); }

// Q8_0 and INT8_CHANNEL, sixteen blocks a step: natural_pair's registers of two consecutive
// blocks, whose 4 lanes of partial sums per 128-bit lane are reduced as they come to one exact
// int32 sum per block; then one permute, one conversion, one scale multiply and one FMA per
// token serve the 16 blocks, where natural_pair converts, scales and adds every pair
// (docs/kernels-decode.md, "Q8_0").
template <int T, typename Row>
inline void natural_sixteen(const Row& w, int64_t b, const QuantizedActivations* const* a, __m512 (&acc)[T]) {
  __m512i couples[T][4];  // couple c: blocks b + 4c .. b + 4c + 3, lane k of each 128 bits summed over pair_up's two
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    __m512i sums[T][2];
#pragma GCC unroll 2
    for (int p = 0; p < 2; ++p) {
      const int64_t first = b + 4 * c + 2 * p;
      prefetch_ahead(w.address(first));
      const __m512i weights = pair_weights(w, first, true);
      const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(),
                                             _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(static_cast<char>(0x80)), weights));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) sums[t][p] = _mm512_dpbusd_epi32(start, _mm512_loadu_si512(a[t]->values_biased + first * kQuantBlock), weights);
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) couples[t][c] = pair_up(sums[t][0], sums[t][1]);
  }
  // 128-bit lane k of a register of blocks (2p, 2p + 1) holds half k % 2 of block 2p + k / 2, so
  // after the in-lane reductions lane k of `early` holds half k % 2 of blocks k / 2, 2 + k / 2,
  // 4 + k / 2, 6 + k / 2, and `late` the same for blocks 8..15. Adding its lanes 0 and 1 (and 2
  // and 3) of both gives the sums in the order 0 2 4 6 1 3 5 7 8 10 12 14 9 11 13 15; the
  // permute puts block j in lane j.
  const __m512i natural = _mm512_set_epi32(15, 11, 14, 10, 13, 9, 12, 8, 7, 3, 6, 2, 5, 1, 4, 0);
  const __m512 weight_scales =
      _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(w.scales8(b))), _mm256_castps_pd(w.scales8(b + 8)), 1));
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const __m512i early = quad_up(couples[t][0], couples[t][1]), late = quad_up(couples[t][2], couples[t][3]);
    const __m512i paired = _mm512_add_epi32(_mm512_shuffle_i64x2(early, late, _MM_SHUFFLE(2, 0, 2, 0)),
                                            _mm512_shuffle_i64x2(early, late, _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512 scales = _mm512_mul_ps(weight_scales, _mm512_loadu_ps(a[t]->scales + b));
    acc[t] = _mm512_fmadd_ps(scales, _mm512_cvtepi32_ps(_mm512_permutexvar_epi32(natural, paired)), acc[t]);
  }
}

// Q4_0, 16 blocks per step: four groups of four consecutive blocks, in nibble order (dot.hpp).
// Group g's 72 bytes (blocks 4g .. 4g + 3) come in two loads, 64 bytes and 8; one word permute
// across the two gathers their nibbles, block 4g + k's into 128-bit lane k (every block's
// nibbles start on a word: 2 bytes of scale, 16 of nibbles), and an AND gives the low nibbles
// and a shift and an AND the high ones, once for every token. Per token each group meets its
// 64 + 64 activations in two vpdpbusd (the nibbles go in unsigned, as stored), leaving block
// 4g + k's partial sums in lanes 4k..4k+3; in-lane unpacks reduce the four registers to one exact
// int32 sum per block, in reduction order, so the zero point's offsets, the scales, the
// conversion and the FMA run once per 16 blocks and token instead of once per group. A step of
// `count` < 16 blocks (the row's end) reads only those bytes; the rest are zero.
template <int T>
inline void q4_0_sixteen_blocks(const BlockQ4_0* blocks, int64_t count, const QuantizedActivations* const* a, int64_t b,
                                __m512 (&acc)[T]) {
  const auto* step = reinterpret_cast<const std::byte*>(blocks);
  const int64_t step_bytes = count * static_cast<int64_t>(sizeof(BlockQ4_0));
  constexpr int64_t kGroupBytes = 4 * sizeof(BlockQ4_0);
  const auto head = [&](int g) {  // group g's first 64 bytes
    const int64_t bytes = step_bytes - g * kGroupBytes;
    if (bytes >= 64) return _mm512_loadu_si512(step + g * kGroupBytes);
    return _mm512_maskz_loadu_epi8(bytes <= 0 ? 0 : (__mmask64{1} << bytes) - 1, step + g * kGroupBytes);
  };
  const auto tail = [&](int g) {  // group g's last 8 bytes, in the lowest 8 of a register
    const int64_t bytes = step_bytes - g * kGroupBytes - 64;
    if (bytes >= 8) return _mm512_castsi128_si512(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(step + g * kGroupBytes + 64)));
    return _mm512_castsi128_si512(_mm_maskz_loadu_epi8(bytes <= 0 ? 0 : static_cast<__mmask16>((1u << bytes) - 1), step + g * kGroupBytes + 64));
  };
  // Word 8k + i of a group's nibbles is word 9k + 1 + i of its bytes (words 32.. are the tail's).
  const __m512i gather = _mm512_set_epi16(35, 34, 33, 32, 31, 30, 29, 28, 26, 25, 24, 23, 22, 21, 20, 19,  //
                                          17, 16, 15, 14, 13, 12, 11, 10, 8, 7, 6, 5, 4, 3, 2, 1);
  const __m512i mask = _mm512_set1_epi8(0x0f);
  __m512i heads[4], low[4], high[4];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    heads[g] = head(g);
    prefetch_ahead(step + g * kGroupBytes);
    prefetch_ahead(step + g * kGroupBytes + 64);
    const __m512i group = _mm512_permutex2var_epi16(heads[g], gather, tail(g));
    low[g] = _mm512_and_si512(group, mask);
    high[g] = _mm512_and_si512(_mm512_srli_epi16(group, 4), mask);
  }
  // The 16 FP16 weight scales in reduction order, where place 4k + j holds block 4j + k: block
  // 4j + k's scale is word 9k of group j's head. One word permute takes places 4k and 4k + 1 from
  // groups 0 and 1, one places 4k + 2 and 4k + 3 from groups 2 and 3, and a blend joins them.
  const __m512i pick = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                        59, 27, 59, 27, 50, 18, 50, 18, 41, 9, 41, 9, 32, 0, 32, 0);
  const __m512i scale_words = _mm512_mask_blend_epi16(0xcccc, _mm512_permutex2var_epi16(heads[0], pick, heads[1]),
                                                      _mm512_permutex2var_epi16(heads[2], pick, heads[3]));
  const __m512 weight_scales = _mm512_cvtph_ps(_mm512_castsi512_si256(scale_words));
  // In-lane unpacks reduce each 128-bit lane k's four sums per group to one: lane k of the
  // result holds group 0..3's k-th blocks, which is reduction order.
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const int8_t* acts = a[t]->nibble_order + b * kQuantBlock;
    __m512i group_sums[4];
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const int8_t* group_acts = acts + g * 4 * kQuantBlock;
      group_sums[g] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), low[g], _mm512_loadu_si512(group_acts)),
                                          high[g], _mm512_loadu_si512(group_acts + 2 * kQuantBlock));
    }
    const __m512i reduced = quad_up(pair_up(group_sums[0], group_sums[1]), pair_up(group_sums[2], group_sums[3]));
    const __m512i sums = _mm512_add_epi32(reduced, _mm512_loadu_si512(a[t]->offsets + b));
    const __m512 scales = _mm512_mul_ps(weight_scales, _mm512_loadu_ps(a[t]->nibble_scales + b));
    acc[t] = _mm512_fmadd_ps(scales, _mm512_cvtepi32_ps(sums), acc[t]);
  }
}

// Two accumulators per token, so that a short step need not wait on the last one's FMA: the
// steps of 16 blocks take the first, a Q4_0 row's last blocks the second, and the pairs of a
// Q8_0 or INT8_CHANNEL row's last blocks alternate between the two.
struct Avx512BlockDot {
  template <int T>
  struct Tokens {
    template <typename Row>
    static void run(const Row& w, const QuantizedActivations* const* a, int64_t cols, float* out) {
      const int64_t blocks = cols / kQuantBlock;
      __m512 even[T], odd[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) even[t] = odd[t] = _mm512_setzero_ps();
      int64_t b = 0;
      if constexpr (std::is_same_v<Row, Q4_0Row>) {
        for (; b + 16 <= blocks; b += 16) q4_0_sixteen_blocks<T>(w.blocks + b, 16, a, b, even);
        if (b < blocks) q4_0_sixteen_blocks<T>(w.blocks + b, blocks - b, a, b, odd);
      } else {
        for (; b + 16 <= blocks; b += 16) natural_sixteen<T>(w, b, a, even);
        for (; b < blocks; b += 2) natural_pair<T>(w, b, b + 1 < blocks, a, b / 2 % 2 ? odd : even);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) out[t] = _mm512_reduce_add_ps(_mm512_add_ps(even[t], odd[t]));
    }
  };
};
using Avx512IntegerKernels = IntegerRowKernels<Avx512BlockDot>;

// CPULLM_Q4_0_R8 and CPULLM_Q8_0_R8 as the AVX2 kernel runs them (dot_avx2.cpp), one row per
// int32 lane of a 256-bit register, with vpdpbusd taking each chunk's products straight into
// int32 lanes. Q4_0: the lanes start at the block's offset and the nibbles go in unsigned, as
// stored; per chunk and token 2 instructions instead of 4, and no madd. Q8_0: the sign trick's
// |w| against a carrying w's sign, one vpdpbusd per chunk and token instead of maddubs and madd.
// The block loop mirrors dot_avx2.cpp's rather than sharing it: a loop defined in a baseline
// header could not inline this file's AVX-512 block sums (the step's shared tail,
// scale_interleaved_sums, is baseline and inlines here).
template <typename Block>
struct Avx512Interleaved {
  template <int T>
  struct Kernel {
    static void run(const std::byte* data, const void* const* activations, int64_t cols, float* out) {
      const auto* group = reinterpret_cast<const Interleaved8<Block>*>(data);
      const auto* const* a = reinterpret_cast<const QuantizedActivations* const*>(activations);
      __m256 acc[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
      for (int64_t b = 0; b < cols / kQuantBlock; ++b) {
        prefetch_ahead(group + b);
        __m256i sums[T];
        if constexpr (std::is_same_v<Block, BlockQ4_0>) {
          const __m256i mask = _mm256_set1_epi8(0x0f);
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) sums[t] = _mm256_set1_epi32(a[t]->block_offsets[b]);
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c) {
            const __m256i nibbles = load32_i8(group[b].chunks[c]);
            const __m256i low = _mm256_and_si256(nibbles, mask), high = _mm256_and_si256(_mm256_srli_epi16(nibbles, 4), mask);
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
              const int8_t* x = a[t]->values + b * kQuantBlock + 4 * c;  // the low nibbles' partners; the high ones' 16 on
              sums[t] = _mm256_dpbusd_epi32(sums[t], low, broadcast4_i8(x));
              sums[t] = _mm256_dpbusd_epi32(sums[t], high, broadcast4_i8(x + kQuantBlock / 2));
            }
          }
        } else {
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) sums[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
          for (int c = 0; c < 8; ++c) {
            const __m256i weights = load32_i8(group[b].chunks[c]);
            const __m256i magnitudes = _mm256_sign_epi8(weights, weights);
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t)
              sums[t] = _mm256_dpbusd_epi32(sums[t], magnitudes,
                                            _mm256_sign_epi8(broadcast4_i8(a[t]->values + b * kQuantBlock + 4 * c), weights));
          }
        }
        scale_interleaved_sums(group[b], a, b, sums, acc);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) _mm256_storeu_ps(out + t * kInterleavedRows, acc[t]);
    }
  };
};

}  // namespace

namespace avx512_dot {
const RowDot f32 = by_token_count<FloatRow<4, load16_f32, load_f32>::Kernel>;
const RowDot f16 = by_token_count<FloatRow<2, load16_f16, load_f16>::Kernel>;
const RowDot bf16 = by_token_count<FloatRow<2, load16_bf16, load_bf16>::Kernel>;
const RowDot q8_0 = Avx512IntegerKernels::q8_0;
const RowDot q4_0 = Avx512IntegerKernels::q4_0;
const RowDot int8_channel = Avx512IntegerKernels::int8_channel;
const RowDot iq4_nl = Avx512IntegerKernels::iq4_nl;
const RowDot q4_0_r8 = by_token_count<Avx512Interleaved<BlockQ4_0>::Kernel>;
const RowDot q8_0_r8 = by_token_count<Avx512Interleaved<BlockQ8_0>::Kernel>;
}  // namespace avx512_dot

}  // namespace cpullm

#pragma GCC pop_options
