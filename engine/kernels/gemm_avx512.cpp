// The GEMM micro-kernels for AVX-512 with VNNI (Ice Lake, Zen 4/5), for the hosts that have
// them. Only this file's functions, under its target pragma, use AVX-512, and they run only
// after cpu_supports(Isa::Avx512). Thirty-two zmm registers: the float tile holds 64 rows x 6
// tokens of accumulators (24), the column's four weight vectors and one broadcast activation;
// the integer tile 32 rows x 6 tokens of int32 block sums and of FP32 totals (24), the two
// weight vectors and one broadcast.
#include <immintrin.h>

#include <cstring>

#include "engine/kernels/gemm.hpp"

// GCC 12's AVX-512 headers warn about their own deliberately undefined values (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni")

namespace cpullm {
namespace {

// Every loop over a tile's rows, tokens or column groups has a compile-time extent and carries
// `#pragma GCC unroll`: unrolled early, the accumulator arrays become registers; without it GCC 12
// kept them in memory too and stored every accumulator on every column (half the speed).
constexpr int kFloatRows = 64, kFloatTokens = 6;
constexpr int kIntegerRows = 32, kIntegerTokens = 6;

template <int N>
void float_tile_of(const FloatTile& t) {
  constexpr int V = kFloatRows / 16;
  __m512 acc[V][N];
  #pragma GCC unroll 8
  for (int v = 0; v < V; ++v)
    #pragma GCC unroll 8
    for (int n = 0; n < N; ++n) acc[v][n] = _mm512_setzero_ps();
  const float* panel = t.panel;
  for (int64_t k = 0; k < t.depth; ++k, panel += kFloatRows) {
    __m512 w[V];
    #pragma GCC unroll 8
    for (int v = 0; v < V; ++v) w[v] = _mm512_load_ps(panel + 16 * v);
    #pragma GCC unroll 8
    for (int n = 0; n < N; ++n) {
      const __m512 x = _mm512_set1_ps(t.x[n * t.x_stride + k]);
      #pragma GCC unroll 8
      for (int v = 0; v < V; ++v) acc[v][n] = _mm512_fmadd_ps(w[v], x, acc[v][n]);
    }
  }
  alignas(64) float tile[N][kFloatRows];
  #pragma GCC unroll 8
  for (int n = 0; n < N; ++n)
    #pragma GCC unroll 8
    for (int v = 0; v < V; ++v) _mm512_store_ps(tile[n] + 16 * v, acc[v][n]);
  write_tile<kFloatRows>(&tile[0][0], t.y, t.y_stride, t.rows, t.tokens, t.accumulate);
}

// sums[v][n] += the products of column groups [kFirst, kLast) of the block's rows 16v..16v+15
// with token n's activations: per group two weight vectors, each token's 4 activations
// broadcast, one vpdpbusd per vector and token.
template <int N, int kFirst, int kLast>
[[gnu::always_inline]] inline void add_products(const std::byte* block, const ActivationBlock* const a[N],
                                                __m512i sums[2][N]) {
  #pragma GCC unroll 8
  for (int g = kFirst; g < kLast; ++g) {
    const __m512i w0 = _mm512_load_si512(block + g * 4 * kIntegerRows);
    const __m512i w1 = _mm512_load_si512(block + g * 4 * kIntegerRows + 64);
    #pragma GCC unroll 8
    for (int n = 0; n < N; ++n) {
      int32_t quad;
      std::memcpy(&quad, a[n]->q + 4 * g, 4);
      const __m512i x = _mm512_set1_epi32(quad);
      sums[0][n] = _mm512_dpbusd_epi32(sums[0][n], w0, x);
      sums[1][n] = _mm512_dpbusd_epi32(sums[1][n], w1, x);
    }
  }
}

// vpdpbusd multiplies unsigned by signed bytes: the panel holds w + 128 as unsigned bytes
// (PanelWeights::Plus128), so each block's int32 sum starts at -128 * (the activations' sum), which
// cancels the offset exactly; it is broadcast from memory for each row group (a load, where a
// register copy would take a vector ALU slot from vpdpbusd).
template <int N>
void integer_tile_of(const IntegerTile& t) {
  __m512 acc[2][N];
  #pragma GCC unroll 8
  for (int n = 0; n < N; ++n) acc[0][n] = acc[1][n] = _mm512_setzero_ps();
  const std::byte* block = t.panel;
  for (int64_t b = 0; b < t.blocks; ++b, block += integer_panel_block_bytes(kIntegerRows)) {
    const ActivationBlock* a[N];
    __m512i sums[2][N];
    #pragma GCC unroll 8
    for (int n = 0; n < N; ++n) {
      a[n] = t.a + n * t.a_stride + b;
      sums[0][n] = _mm512_set1_epi32(a[n]->offset_sum);
      sums[1][n] = _mm512_set1_epi32(a[n]->offset_sum);
    }
    add_products<N, 0, kQuantBlock / 4>(block, a, sums);
    const auto* scales = reinterpret_cast<const float*>(block + kQuantBlock * kIntegerRows);
    const __m512 s0 = _mm512_load_ps(scales), s1 = _mm512_load_ps(scales + 16);
    #pragma GCC unroll 8
    for (int n = 0; n < N; ++n) {
      const __m512 as = _mm512_set1_ps(a[n]->scale);
      acc[0][n] = _mm512_fmadd_ps(_mm512_mul_ps(s0, as), _mm512_cvtepi32_ps(sums[0][n]), acc[0][n]);
      acc[1][n] = _mm512_fmadd_ps(_mm512_mul_ps(s1, as), _mm512_cvtepi32_ps(sums[1][n]), acc[1][n]);
    }
  }
  alignas(64) float tile[N][kIntegerRows];
  #pragma GCC unroll 8
  for (int n = 0; n < N; ++n) _mm512_store_ps(tile[n], acc[0][n]), _mm512_store_ps(tile[n] + 16, acc[1][n]);
  write_tile<kIntegerRows>(&tile[0][0], t.y, t.y_stride, t.rows, t.tokens, t.accumulate);
}

// Sub-block panels hold q unsigned as stored, vpdpbusd's unsigned operand: the int32 sums start
// at zero. Per half of the block (kWhole: per block) the sums are scaled; the offsets multiply the
// activations' half sums.
template <int N, bool kWhole>
void sub_block_tile_of(const IntegerTile& t) {
  constexpr int kParts = kWhole ? 1 : 2, kGroups = kQuantBlock / 4 / kParts;  // groups of 4 columns a part
  __m512 acc[2][N];
  #pragma GCC unroll 8
  for (int n = 0; n < N; ++n) acc[0][n] = acc[1][n] = _mm512_setzero_ps();
  const std::byte* block = t.panel;
  for (int64_t b = 0; b < t.blocks; ++b, block += sub_block_panel_block_bytes(kIntegerRows)) {
    const auto* factors = reinterpret_cast<const float*>(block + kQuantBlock * kIntegerRows);  // scales, offsets (2, R)
    const ActivationBlock* a[N];
    #pragma GCC unroll 8
    for (int n = 0; n < N; ++n) a[n] = t.a + n * t.a_stride + b;
    #pragma GCC unroll 2
    for (int part = 0; part < kParts; ++part) {
      __m512i sums[2][N];
      #pragma GCC unroll 8
      for (int n = 0; n < N; ++n) sums[0][n] = sums[1][n] = _mm512_setzero_si512();
      if (part == 0) add_products<N, 0, kGroups>(block, a, sums);
      else add_products<N, kGroups, 2 * kGroups>(block, a, sums);
      const __m512 s0 = _mm512_load_ps(factors + part * kIntegerRows), s1 = _mm512_load_ps(factors + part * kIntegerRows + 16);
      #pragma GCC unroll 8
      for (int n = 0; n < N; ++n) {
        const __m512 as = _mm512_set1_ps(a[n]->scale);
        acc[0][n] = _mm512_fmadd_ps(_mm512_mul_ps(s0, as), _mm512_cvtepi32_ps(sums[0][n]), acc[0][n]);
        acc[1][n] = _mm512_fmadd_ps(_mm512_mul_ps(s1, as), _mm512_cvtepi32_ps(sums[1][n]), acc[1][n]);
      }
    }
    const float* offsets = factors + 2 * kIntegerRows;
    #pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      const __m512 o0 = _mm512_load_ps(offsets + 16 * v);
      #pragma GCC unroll 8
      for (int n = 0; n < N; ++n) {
        if constexpr (kWhole) {
          acc[v][n] = _mm512_fmadd_ps(o0, _mm512_set1_ps(a[n]->half_sums[0] + a[n]->half_sums[1]), acc[v][n]);
        } else {
          const __m512 o1 = _mm512_load_ps(offsets + kIntegerRows + 16 * v);
          acc[v][n] = _mm512_fmadd_ps(o0, _mm512_set1_ps(a[n]->half_sums[0]), acc[v][n]);
          acc[v][n] = _mm512_fmadd_ps(o1, _mm512_set1_ps(a[n]->half_sums[1]), acc[v][n]);
        }
      }
    }
  }
  alignas(64) float tile[N][kIntegerRows];
  #pragma GCC unroll 8
  for (int n = 0; n < N; ++n) _mm512_store_ps(tile[n], acc[0][n]), _mm512_store_ps(tile[n] + 16, acc[1][n]);
  write_tile<kIntegerRows>(&tile[0][0], t.y, t.y_stride, t.rows, t.tokens, t.accumulate);
}

void float_tile(const FloatTile& t) {
  with_token_count<kFloatTokens>(t.tokens, [&]<int N>() { float_tile_of<N>(t); });
}
void integer_tile(const IntegerTile& t) {
  with_token_count<kIntegerTokens>(t.tokens, [&]<int N>() { integer_tile_of<N>(t); });
}

template <bool kWhole>
void sub_block_tile(const IntegerTile& t) {
  with_token_count<kIntegerTokens>(t.tokens, [&]<int N>() { sub_block_tile_of<N, kWhole>(t); });
}

}  // namespace

const GemmKernels& avx512_gemm_kernels() {
  static constexpr IntegerTileKernel kInteger{integer_tile, kIntegerRows, kIntegerTokens, PanelWeights::Plus128};
  static constexpr IntegerTileKernel kSubBlocks{sub_block_tile<false>, kIntegerRows, kIntegerTokens, PanelWeights::Unsigned};
  static constexpr IntegerTileKernel kWholeBlocks{sub_block_tile<true>, kIntegerRows, kIntegerTokens, PanelWeights::Unsigned};
  static const GemmKernels kernels{float_tile, kFloatRows, kFloatTokens, kInteger, kInteger, kSubBlocks, kWholeBlocks};
  return kernels;
}

}  // namespace cpullm

#pragma GCC pop_options
