// AVX2 + FMA + F16C dot products: the Xeon E5 v4's instruction set and the program's baseline.
// Float rows: four 8-wide FMA accumulators, enough independent chains to cover FMA latency.
// Block rows: int8 x int8 products summed exactly per block with maddubs/madd, then scaled.
#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "engine/kernels/dot.hpp"
#include "engine/kernels/int8_rows.hpp"
#include "engine/util/half.hpp"

namespace cpullm {
namespace {

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

// In-lane unpacks reduce each 128-bit lane's four int32 sums of x and y to two each
// (x0 + x2, y0 + y2, x1 + x3, y1 + y3), and quad_up those of two such pairs to one each: four
// registers' lanes summed by 6 unpacks and 3 adds, 1.01-1.08x as fast as three hadds
// (bench_kernels matvec). With Add = _mm256_add_epi16 they move int32 lanes
// the same way and add the two int16 halves of each apart.
template <__m256i (*Add)(__m256i, __m256i) = _mm256_add_epi32>
inline __m256i pair_up(__m256i x, __m256i y) { return Add(_mm256_unpacklo_epi32(x, y), _mm256_unpackhi_epi32(x, y)); }
template <__m256i (*Add)(__m256i, __m256i) = _mm256_add_epi32>
inline __m256i quad_up(__m256i x, __m256i y) { return Add(_mm256_unpacklo_epi64(x, y), _mm256_unpackhi_epi64(x, y)); }

// Half s (0 or 1) of the Q4_0 step of 16 blocks at b: blocks 4j + 2s and 4j + 2s + 1 of every
// group j of 4 (nibble order, dot.hpp). Each such pair is one register of nibbles, loaded and
// unpacked once for every token: one AND takes the low nibbles, a shift and an AND the high
// ones. Per token, each meets its 32 activations in one maddubs (the nibbles go in unsigned, as
// stored) and the two int16 products add: words 0-7 hold the pair's first block's partial sums,
// 8-15 its second's, each at most 4 * 15 * 127 = 7620 in magnitude. In-lane unpacks and int16
// adds reduce the four pairs to two words per block (at most 4 * 7620 = 30480, still exact in
// int16), and one madd leaves one exact int32 sum per block, in reduction order (dot.hpp): a madd
// per 8 blocks where one per pair takes 1.02-1.05x longer in L2 (bench_kernels matvec). The zero
// point's offsets, the scales, the conversion and the FMA then run once per 8 blocks and token
// instead of once per pair (docs/kernels-decode.md, "Q4_0").
template <int T>
inline void q4_0_half_step(const BlockQ4_0* step, int s, const QuantizedActivations* const* a, int64_t b, __m256 (&acc)[T]) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  const auto first = [&](int j) { return step + 4 * j + 2 * s; };  // pair j's first block
  // The eight FP16 weight scales in reduction order. A 32-byte load at pair j's first block holds
  // its scale in word 0 and the second block's in word 9 (the upper lane's word 1); two word and
  // one dword interleave gather them as words 0-3 (the pairs' first blocks) and 12-15 (their
  // second blocks).
  const auto head = [&](int j) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(first(j))); };
  const __m256i interleaved = _mm256_unpacklo_epi32(_mm256_unpacklo_epi16(head(0), head(1)),
                                                    _mm256_unpacklo_epi16(head(2), head(3)));
  const __m256 weight_scales = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(interleaved, 0b1100)));
  // One token unpacks all four pairs at once. Two to four take pairs 0-1, then 2-3: with all
  // four pairs' nibbles (8 registers) live across their products, GCC spilled 18-39 values a step.
  constexpr int kPairsAtOnce = T == 1 ? 4 : 2;
  __m256i paired[T][2];  // each token's pairs 0 and 1, and 2 and 3, paired up
#pragma GCC unroll 2
  for (int g = 0; g < 4; g += kPairsAtOnce) {
    __m256i low[kPairsAtOnce], high[kPairsAtOnce];
#pragma GCC unroll 4
    for (int k = 0; k < kPairsAtOnce; ++k) {
      const __m256i nibbles = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(first(g + k)[1].nibbles),
                                                  reinterpret_cast<const __m128i*>(first(g + k)[0].nibbles));
      low[k] = _mm256_and_si256(nibbles, mask);
      high[k] = _mm256_and_si256(_mm256_srli_epi16(nibbles, 4), mask);
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const int8_t* acts = a[t]->nibble_order + b * kQuantBlock + s * kQuantBlock;
      __m256i products[kPairsAtOnce];
#pragma GCC unroll 4
      for (int k = 0; k < kPairsAtOnce; ++k) {
        const int8_t* low_acts = acts + (g + k) * 4 * kQuantBlock;  // the pair's first halves; their second halves 64 bytes on
        products[k] = _mm256_add_epi16(_mm256_maddubs_epi16(low[k], load32_i8(low_acts)),
                                       _mm256_maddubs_epi16(high[k], load32_i8(low_acts + 2 * kQuantBlock)));
      }
#pragma GCC unroll 2
      for (int k = 0; k < kPairsAtOnce; k += 2)
        paired[t][(g + k) / 2] = pair_up<_mm256_add_epi16>(products[k], products[k + 1]);
      if (g + kPairsAtOnce < 4) continue;  // pairs 2 and 3 still to come
      const __m256i reduced = _mm256_madd_epi16(quad_up<_mm256_add_epi16>(paired[t][0], paired[t][1]), _mm256_set1_epi16(1));
      const int64_t places = b + 8 * s;
      const __m256i sums = _mm256_add_epi32(reduced, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t]->offsets + places)));
      const __m256 scales = _mm256_mul_ps(weight_scales, _mm256_loadu_ps(a[t]->nibble_scales + places));
      acc[t] = _mm256_fmadd_ps(scales, _mm256_cvtepi32_ps(sums), acc[t]);
    }
  }
}

// Q8_0 and INT8_CHANNEL, eight blocks a step in natural order. Each block's 8 lanes of partial
// sums are reduced as they come, two blocks at a time, to one exact int32 sum per block, block j
// in lane j; then one conversion, one scale multiply and one FMA serve the 8 blocks, where a step
// per block paid a scalar scale (Q8_0: converted from FP16), a broadcast, a multiply, a
// conversion and an FMA for each (docs/kernels-decode.md, "Q8_0").
template <int T, typename Row>
inline void eight_blocks(const Row& w, int64_t b, const QuantizedActivations* const* a, __m256 (&acc)[T]) {
  __m256i pairs[T][4];
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    prefetch_ahead(w.address(b + 2 * p));
    const __m256i first = w.weights(b + 2 * p), second = w.weights(b + 2 * p + 1);
    const __m256i first_magnitudes = _mm256_sign_epi8(first, first), second_magnitudes = _mm256_sign_epi8(second, second);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const int8_t* x = a[t]->values + (b + 2 * p) * kQuantBlock;
      pairs[t][p] = pair_up(block_products(first, first_magnitudes, load32_i8(x)),
                            block_products(second, second_magnitudes, load32_i8(x + kQuantBlock)));
    }
  }
  const __m256 weight_scales = w.scales8(b);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    // Lane k of early's low half holds block k's lower-lane sum, of its high half block k's
    // upper-lane sum; the same for blocks 4-7 in late. Swapping halves across the two and adding puts
    // block j's whole sum in lane j.
    const __m256i early = quad_up(pairs[t][0], pairs[t][1]), late = quad_up(pairs[t][2], pairs[t][3]);
    const __m256i sums = _mm256_add_epi32(_mm256_permute2x128_si256(early, late, 0x20), _mm256_permute2x128_si256(early, late, 0x31));
    const __m256 scales = _mm256_mul_ps(weight_scales, _mm256_loadu_ps(a[t]->scales + b));
    acc[t] = _mm256_fmadd_ps(scales, _mm256_cvtepi32_ps(sums), acc[t]);
  }
}

// Two accumulators per token: with one, a step of one block waited on the previous step's FMA
// (4-5 cycles), which cost Q8_0 12% and INT8_CHANNEL 18% of their time in L2. Q4_0's two halves
// of a step take one each; Q8_0's and INT8_CHANNEL's steps of 8 take the first and their last
// blocks (fewer than 8, one at a time) alternate between the two. Each row is still one stream
// of sequential loads, which the hardware prefetcher follows from row to row.
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
        for (; b + 16 <= blocks; b += 16) {
          // Five prefetches 64 bytes apart from each step's start (288 bytes) reach every line
          // the steps read (a line the last one misses holds the next step's start, or the row's
          // last blocks, which no prefetch reached before either), where one per pair takes 8.
          for (int line = 0; line < 5; ++line) prefetch_ahead(reinterpret_cast<const std::byte*>(w.blocks + b) + 64 * line);
          q4_0_half_step<T>(w.blocks + b, 0, a, b, even), q4_0_half_step<T>(w.blocks + b, 1, a, b, odd);
        }
        if (b < blocks) {  // the last blocks, copied beside zero blocks (zero scales) that add nothing
          BlockQ4_0 tail[16] = {};
          std::copy(w.blocks + b, w.blocks + blocks, tail);
          q4_0_half_step<T>(tail, 0, a, b, even);
          if (blocks - b > 2) q4_0_half_step<T>(tail, 1, a, b, odd);  // half 1 starts at block 2
        }
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
        for (; b + 8 <= blocks; b += 8) eight_blocks<T>(w, b, a, even);
        for (; b < blocks; ++b) prefetch_ahead(w.address(b)), step(b, b % 2 ? odd : even);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) out[t] = horizontal_sum(_mm256_add_ps(even[t], odd[t]));
    }
  };
};
using Avx2IntegerKernels = IntegerRowKernels<Avx2BlockDot>;

// CPULLM_Q4_0_R8 and CPULLM_Q8_0_R8: a group of 8 rows, one row per int32 lane, so no sums
// cross lanes; per block the lanes' int32 sums of each token come from the format's chunks
// (block_sums below), then one conversion, the 8 rows' scales and an FMA serve the block.
//
// Q4_0: per chunk one load, an AND (low nibbles) and a shift and an AND (high nibbles) serve every
// token; per token two maddubs meet them with 4 activations broadcast to every lane. The nibbles
// go in unsigned, as stored: a lane's 8 int16 pairs of products per block stay within
// 8 * 2 * 15 * 127 = 30480, so they add as int16 and one madd per block widens them; the
// block's offset (-8 * the sum of its activations) then leaves exactly w.a per row. Against the
// Q4_0 row kernel's step this saves the 128-bit inserts, the cross-lane reduction and three of
// every four madds (docs/kernels-decode.md, "Interleaved rows").
//
// Q8_0: per chunk one load and its magnitudes serve every token; per token the sign trick's
// maddubs and a madd into the int32 lanes (two chunks' int16 pairs could overflow). Against the
// Q8_0 row kernel this saves the per-block conversion, scale multiply and FMA of each row, and
// the row's final reduction (docs/kernels-decode.md, "Interleaved rows").
template <typename Block>
struct Avx2Interleaved {
  template <int T>
  static void block_sums(const Interleaved8<Block>& block, const QuantizedActivations* const* a, int64_t b,
                         __m256i (&sums)[T]) {
    if constexpr (std::is_same_v<Block, BlockQ4_0>) {
      const __m256i mask = _mm256_set1_epi8(0x0f);
      __m256i products[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) products[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m256i nibbles = load32_i8(block.chunks[c]);
        const __m256i low = _mm256_and_si256(nibbles, mask), high = _mm256_and_si256(_mm256_srli_epi16(nibbles, 4), mask);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const int8_t* x = a[t]->values + b * kQuantBlock + 4 * c;  // the low nibbles' partners; the high ones' 16 on
          products[t] = _mm256_add_epi16(products[t], _mm256_add_epi16(_mm256_maddubs_epi16(low, broadcast4_i8(x)),
                                                                       _mm256_maddubs_epi16(high, broadcast4_i8(x + kQuantBlock / 2))));
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t)
        sums[t] = _mm256_add_epi32(_mm256_madd_epi16(products[t], _mm256_set1_epi16(1)), _mm256_set1_epi32(a[t]->block_offsets[b]));
    } else {
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) sums[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) {
        const __m256i weights = load32_i8(block.chunks[c]);
        const __m256i magnitudes = _mm256_sign_epi8(weights, weights);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t)
          sums[t] = _mm256_add_epi32(sums[t], block_products(weights, magnitudes, broadcast4_i8(a[t]->values + b * kQuantBlock + 4 * c)));
      }
    }
  }

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
        block_sums<T>(group[b], a, b, sums);
        scale_interleaved_sums(group[b], a, b, sums, acc);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) _mm256_storeu_ps(out + t * kInterleavedRows, acc[t]);
    }
  };
};

}  // namespace

namespace avx2_dot {
const RowDot f32 = by_token_count<FloatRow<4, load8_f32, load_f32>::Kernel>;
const RowDot f16 = by_token_count<FloatRow<2, load8_f16, load_f16>::Kernel>;
const RowDot bf16 = by_token_count<FloatRow<2, load8_bf16, load_bf16>::Kernel>;
const RowDot q8_0 = Avx2IntegerKernels::q8_0;
const RowDot q4_0 = Avx2IntegerKernels::q4_0;
const RowDot int8_channel = Avx2IntegerKernels::int8_channel;
const RowDot iq4_nl = Avx2IntegerKernels::iq4_nl;
const RowDot q4_0_r8 = by_token_count<Avx2Interleaved<BlockQ4_0>::Kernel>;
const RowDot q8_0_r8 = by_token_count<Avx2Interleaved<BlockQ8_0>::Kernel>;
}  // namespace avx2_dot

}  // namespace cpullm
