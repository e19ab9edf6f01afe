// The GEMM micro-kernels for AVX2 + FMA, the Xeon E5 v4's instruction set. Sixteen ymm
// registers: the float tile holds 16 rows x 6 tokens of accumulators (12), the column's two
// weight vectors and one broadcast activation; the integer tile 8 rows x 4 tokens of block sums
// (int32, int16 for Q4_0) and FP32 totals (8), the weights, their absolute values and the
// maddubs temporaries.
#include <immintrin.h>

#include <cstring>

#include "engine/kernels/gemm.hpp"

namespace cpullm {
namespace {

// Every loop over a tile's rows, tokens or column groups has a compile-time extent and carries
// `#pragma GCC unroll`: unrolled early, the accumulator arrays become registers; without it GCC 12
// kept them in memory too and stored every accumulator on every column (half the speed).
constexpr int kFloatRows = 16, kFloatTokens = 6;
constexpr int kIntegerRows = 8, kIntegerTokens = 4;

template <int N>
void float_tile_of(const FloatTile& t) {
  __m256 acc[2][N];
  #pragma GCC unroll 8
  for (int n = 0; n < N; ++n) acc[0][n] = acc[1][n] = _mm256_setzero_ps();
  const float* panel = t.panel;
  for (int64_t k = 0; k < t.depth; ++k, panel += kFloatRows) {
    const __m256 w0 = _mm256_load_ps(panel), w1 = _mm256_load_ps(panel + 8);
    #pragma GCC unroll 8
    for (int n = 0; n < N; ++n) {
      const __m256 x = _mm256_broadcast_ss(t.x + n * t.x_stride + k);
      acc[0][n] = _mm256_fmadd_ps(w0, x, acc[0][n]);
      acc[1][n] = _mm256_fmadd_ps(w1, x, acc[1][n]);
    }
  }
  alignas(32) float tile[N][kFloatRows];
  #pragma GCC unroll 8
  for (int n = 0; n < N; ++n) _mm256_store_ps(tile[n], acc[0][n]), _mm256_store_ps(tile[n] + 8, acc[1][n]);
  write_tile<kFloatRows>(&tile[0][0], t.y, t.y_stride, t.rows, t.tokens, t.accumulate);
}

// One micro-kernel for both panel encodings it reads. maddubs multiplies unsigned by signed
// bytes, 4 weights of each of 8 rows by the same 4 activations into pairs of int16 products:
// - Signed panels (Q8_0, INT8 per channel): |w| meets a carrying w's sign; a pair reaches
//   2 * 128 * 127, so each is widened to int32 (madd with ones) and added at once.
// - Plus8 panels (Q4_0): the nibbles w + 8 (0..15) are the unsigned operand as they are. A pair
//   is at most 2 * 15 * 127 and the 8 groups' pairs of a lane, summed in int16, at most 30480:
//   one madd per block widens them, and -8 * (the block's activation sum) makes the sum exact.
//   Per group and token one maddubs and one add, where the signed path needs sign, maddubs,
//   madd and add.
template <int N, PanelWeights kWeights>
void integer_tile_of(const IntegerTile& t) {
  constexpr bool kNibbles = kWeights == PanelWeights::Plus8;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[N];
  #pragma GCC unroll 8
  for (int n = 0; n < N; ++n) acc[n] = _mm256_setzero_ps();
  const std::byte* block = t.panel;
  for (int64_t b = 0; b < t.blocks; ++b, block += integer_panel_block_bytes(kIntegerRows)) {
    const ActivationBlock* a[N];
    __m256i sums[N];  // int16 pairs (Plus8) or int32 lanes (Signed)
    #pragma GCC unroll 8
    for (int n = 0; n < N; ++n) a[n] = t.a + n * t.a_stride + b, sums[n] = _mm256_setzero_si256();
    // Half the groups at a time: unrolled whole, GCC 12 rebalances each token's chain of adds into
    // a tree, holds the 32 products at once and spills 43-48 of them to the stack per block (the
    // GEMM 1.3x slower for Q4_0, 1.1x for Q8_0 in bench_kernels matmul; docs/kernels-prefill.md).
    #pragma GCC unroll 4
    for (int g = 0; g < kQuantBlock / 4; ++g) {
      const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(block + g * 4 * kIntegerRows));
      const __m256i abs_w = kNibbles ? w : _mm256_abs_epi8(w);
      #pragma GCC unroll 8
      for (int n = 0; n < N; ++n) {
        int32_t quad;
        std::memcpy(&quad, a[n]->q + 4 * g, 4);
        const __m256i x = _mm256_set1_epi32(quad);
        if constexpr (kNibbles)
          sums[n] = _mm256_add_epi16(sums[n], _mm256_maddubs_epi16(w, x));
        else
          sums[n] = _mm256_add_epi32(sums[n], _mm256_madd_epi16(_mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(x, w)), ones));
      }
    }
    const __m256 scales = _mm256_load_ps(reinterpret_cast<const float*>(block + kQuantBlock * kIntegerRows));
    #pragma GCC unroll 8
    for (int n = 0; n < N; ++n) {
      // offset_sum is -128 * the activation sum, a multiple of 16: the shift is exact.
      const __m256i exact = kNibbles ? _mm256_add_epi32(_mm256_madd_epi16(sums[n], ones), _mm256_set1_epi32(a[n]->offset_sum >> 4))
                                     : sums[n];
      acc[n] = _mm256_fmadd_ps(_mm256_mul_ps(scales, _mm256_set1_ps(a[n]->scale)), _mm256_cvtepi32_ps(exact), acc[n]);
    }
  }
  alignas(32) float tile[N][kIntegerRows];
  #pragma GCC unroll 8
  for (int n = 0; n < N; ++n) _mm256_store_ps(tile[n], acc[n]);
  write_tile<kIntegerRows>(&tile[0][0], t.y, t.y_stride, t.rows, t.tokens, t.accumulate);
}

// Sub-block panels: the values q are unsigned and at most 63, so a maddubs pair against Q8_0
// activations (|a| <= 127) is at most 2 * 63 * 127 = 16002, and two groups' pairs add in int16
// before one madd widens them. Per half of the block (kWhole: per block) the exact int32 sums
// are scaled; the offsets multiply the activations' half sums.
template <int N, bool kWhole>
void sub_block_tile_of(const IntegerTile& t) {
  constexpr int kParts = kWhole ? 1 : 2, kGroups = kQuantBlock / 4 / kParts;  // groups of 4 columns a part
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[N];
  #pragma GCC unroll 8
  for (int n = 0; n < N; ++n) acc[n] = _mm256_setzero_ps();
  const std::byte* block = t.panel;
  for (int64_t b = 0; b < t.blocks; ++b, block += sub_block_panel_block_bytes(kIntegerRows)) {
    const auto* factors = reinterpret_cast<const float*>(block + kQuantBlock * kIntegerRows);  // scales, offsets (2, R)
    const ActivationBlock* a[N];
    #pragma GCC unroll 8
    for (int n = 0; n < N; ++n) a[n] = t.a + n * t.a_stride + b;
    #pragma GCC unroll 2
    for (int part = 0; part < kParts; ++part) {
      __m256i sums[N];
      #pragma GCC unroll 8
      for (int n = 0; n < N; ++n) sums[n] = _mm256_setzero_si256();
      #pragma GCC unroll 4
      for (int g = part * kGroups; g < (part + 1) * kGroups; g += 2) {
        const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(block + g * 4 * kIntegerRows));
        const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(block + (g + 1) * 4 * kIntegerRows));
        #pragma GCC unroll 8
        for (int n = 0; n < N; ++n) {
          int32_t quads[2];
          std::memcpy(quads, a[n]->q + 4 * g, 8);
          const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(w0, _mm256_set1_epi32(quads[0])),
                                                 _mm256_maddubs_epi16(w1, _mm256_set1_epi32(quads[1])));
          sums[n] = _mm256_add_epi32(sums[n], _mm256_madd_epi16(pairs, ones));
        }
      }
      const __m256 scales = _mm256_load_ps(factors + part * kIntegerRows);
      #pragma GCC unroll 8
      for (int n = 0; n < N; ++n)
        acc[n] = _mm256_fmadd_ps(_mm256_mul_ps(scales, _mm256_set1_ps(a[n]->scale)), _mm256_cvtepi32_ps(sums[n]), acc[n]);
    }
    const __m256 offsets0 = _mm256_load_ps(factors + 2 * kIntegerRows);
    #pragma GCC unroll 8
    for (int n = 0; n < N; ++n) {
      if constexpr (kWhole) {
        acc[n] = _mm256_fmadd_ps(offsets0, _mm256_set1_ps(a[n]->half_sums[0] + a[n]->half_sums[1]), acc[n]);
      } else {
        const __m256 offsets1 = _mm256_load_ps(factors + 3 * kIntegerRows);
        acc[n] = _mm256_fmadd_ps(offsets0, _mm256_set1_ps(a[n]->half_sums[0]), acc[n]);
        acc[n] = _mm256_fmadd_ps(offsets1, _mm256_set1_ps(a[n]->half_sums[1]), acc[n]);
      }
    }
  }
  alignas(32) float tile[N][kIntegerRows];
  #pragma GCC unroll 8
  for (int n = 0; n < N; ++n) _mm256_store_ps(tile[n], acc[n]);
  write_tile<kIntegerRows>(&tile[0][0], t.y, t.y_stride, t.rows, t.tokens, t.accumulate);
}

void float_tile(const FloatTile& t) {
  with_token_count<kFloatTokens>(t.tokens, [&]<int N>() { float_tile_of<N>(t); });
}
template <PanelWeights kWeights>
void integer_tile(const IntegerTile& t) {
  with_token_count<kIntegerTokens>(t.tokens, [&]<int N>() { integer_tile_of<N, kWeights>(t); });
}

template <bool kWhole>
void sub_block_tile(const IntegerTile& t) {
  with_token_count<kIntegerTokens>(t.tokens, [&]<int N>() { sub_block_tile_of<N, kWhole>(t); });
}

}  // namespace

const GemmKernels& avx2_gemm_kernels() {
  static constexpr IntegerTileKernel kInteger{integer_tile<PanelWeights::Signed>, kIntegerRows, kIntegerTokens,
                                              PanelWeights::Signed};
  static constexpr IntegerTileKernel kQ4_0{integer_tile<PanelWeights::Plus8>, kIntegerRows, kIntegerTokens,
                                           PanelWeights::Plus8};
  static constexpr IntegerTileKernel kSubBlocks{sub_block_tile<false>, kIntegerRows, kIntegerTokens, PanelWeights::Unsigned};
  static constexpr IntegerTileKernel kWholeBlocks{sub_block_tile<true>, kIntegerRows, kIntegerTokens, PanelWeights::Unsigned};
  static const GemmKernels kernels{float_tile, kFloatRows, kFloatTokens, kInteger, kQ4_0, kSubBlocks, kWholeBlocks};
  return kernels;
}

}  // namespace cpullm
