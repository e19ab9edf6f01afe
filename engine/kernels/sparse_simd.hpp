// The SIMD sparse kernels, written once over a 16-float vector type that each ISA level
// supplies (`Ops`: one __m512 for AVX-512, two __m256 for AVX2). Included by sparse_avx2.cpp
// and, after its target pragma, by sparse_avx512.cpp: everything here is a template over Ops,
// whose types are local to those files, so each level's instantiations stay in its own file
// and no AVX-512 code can reach baseline callers.
//   Ops::Vec, Ops::Index               16 floats, 16 int32 column indices
//   zero, add, fma, broadcast(float), load(const float*), quad(const float* p): p[0..3] four times
//   values<V>(const std::byte*)        16 stored values of precision V, widened
//   columns_u16(p), columns_u8(p, start): ELL columns, N:M positions plus their group starts
//   gather(x, Index), sum(Vec), quad_sums(Vec, float out[4]): out[i] = lanes 4i..4i+3, store(float*, Vec)
#pragma once
#include "engine/kernels/sparse.hpp"

namespace cpullm {

template <typename Ops>
struct SimdSparse {
  using Vec = typename Ops::Vec;
  static constexpr int64_t T = kSparseTileTokens;

  template <SparsePattern P>
  static typename Ops::Index columns16(const SparseView& w, const std::byte* indices, int64_t j) {
    if constexpr (P == SparsePattern::ell) return Ops::columns_u16(indices + 2 * j);
    else return Ops::columns_u8(indices + j, w.group_start + j);
  }

  // ELL and N:M: 16 stored values against x gathered at their columns, two chains.
  template <SparsePattern P, GgmlType V>
  static void gather_rows(const SparseView& w, const float* x, float* y, int64_t r0, int64_t r1) {
    constexpr int64_t E = kValueBytes<V>;
    for (int64_t r = r0; r < r1; ++r) {
      const std::byte* values = w.data + r * w.stride;
      const std::byte* indices = values + w.kept * E;
      Vec acc0 = Ops::zero(), acc1 = Ops::zero();
      int64_t j = 0;
      for (; j + 32 <= w.kept; j += 32) {
        acc0 = Ops::fma(Ops::template values<V>(values + j * E), Ops::gather(x, columns16<P>(w, indices, j)), acc0);
        acc1 = Ops::fma(Ops::template values<V>(values + (j + 16) * E), Ops::gather(x, columns16<P>(w, indices, j + 16)),
                        acc1);
      }
      for (; j + 16 <= w.kept; j += 16)
        acc0 = Ops::fma(Ops::template values<V>(values + j * E), Ops::gather(x, columns16<P>(w, indices, j)), acc0);
      float sum = Ops::sum(Ops::add(acc0, acc1));
      for (; j < w.kept; ++j) sum += load_value<V>(values + j * E) * x[column_of<P>(w, indices, j)];
      y[r] = sum;
    }
  }

  // BLOCK4X4: a block's 16 values times x's 4 values at its column repeated 4 times; the
  // lanes of each quad sum to one of the strip's 4 outputs.
  template <GgmlType V>
  static void block_rows(const SparseView& w, const float* x, float* y, int64_t r0, int64_t r1) {
    constexpr int64_t E = kValueBytes<V>;
    for (int64_t strip = r0 / 4; strip < r1 / 4; ++strip) {
      const std::byte* values = w.data + strip * w.stride;
      const std::byte* columns = values + w.kept * 16 * E;
      Vec acc0 = Ops::zero(), acc1 = Ops::zero();
      int64_t b = 0;
      for (; b + 2 <= w.kept; b += 2) {
        acc0 = Ops::fma(Ops::template values<V>(values + b * 16 * E), Ops::quad(x + 4 * block_column(columns, b)), acc0);
        acc1 = Ops::fma(Ops::template values<V>(values + (b + 1) * 16 * E),
                        Ops::quad(x + 4 * block_column(columns, b + 1)), acc1);
      }
      if (b < w.kept)
        acc0 = Ops::fma(Ops::template values<V>(values + b * 16 * E), Ops::quad(x + 4 * block_column(columns, b)), acc0);
      Ops::quad_sums(Ops::add(acc0, acc1), y + 4 * strip);
    }
  }

  // Writes the first `tokens` lanes of acc as output row r.
  static void store_tokens(Vec acc, int64_t tokens, float* y, int64_t y_stride, int64_t r) {
    float lanes[T];
    Ops::store(lanes, acc);
    for (int64_t t = 0; t < tokens; ++t) y[t * y_stride + r] = lanes[t];
  }

  // ELL and N:M over a token tile: R rows at once (independent chains), each stored value
  // broadcast against the 16 tokens' values at its column.
  template <SparsePattern P, GgmlType V, int R>
  static void gather_tile_rows(const SparseView& w, const float* xt, int64_t tokens, float* y, int64_t y_stride,
                               int64_t r) {
    constexpr int64_t E = kValueBytes<V>;
    const std::byte* values[R];
    const std::byte* indices[R];
    Vec acc[R];
    for (int i = 0; i < R; ++i) {
      values[i] = w.data + (r + i) * w.stride;
      indices[i] = values[i] + w.kept * E;
      acc[i] = Ops::zero();
    }
    for (int64_t j = 0; j < w.kept; ++j)
      for (int i = 0; i < R; ++i)
        acc[i] = Ops::fma(Ops::broadcast(load_value<V>(values[i] + j * E)),
                          Ops::load(xt + column_of<P>(w, indices[i], j) * T), acc[i]);
    for (int i = 0; i < R; ++i) store_tokens(acc[i], tokens, y, y_stride, r + i);
  }

  template <GgmlType V>
  static void block_tile(const SparseView& w, const float* xt, int64_t tokens, float* y, int64_t y_stride,
                         int64_t r0, int64_t r1) {
    constexpr int64_t E = kValueBytes<V>;
    for (int64_t strip = r0 / 4; strip < r1 / 4; ++strip) {
      const std::byte* values = w.data + strip * w.stride;
      const std::byte* columns = values + w.kept * 16 * E;
      Vec acc[4] = {Ops::zero(), Ops::zero(), Ops::zero(), Ops::zero()};
      for (int64_t b = 0; b < w.kept; ++b) {
        const float* xb = xt + 4 * block_column(columns, b) * T;
        for (int k = 0; k < 4; ++k) {
          const Vec xk = Ops::load(xb + k * T);
          for (int i = 0; i < 4; ++i)
            acc[i] = Ops::fma(Ops::broadcast(load_value<V>(values + (b * 16 + i * 4 + k) * E)), xk, acc[i]);
        }
      }
      for (int i = 0; i < 4; ++i) store_tokens(acc[i], tokens, y, y_stride, strip * 4 + i);
    }
  }

  template <SparsePattern P, GgmlType V>
  static void gather_tile(const SparseView& w, const float* xt, int64_t tokens, float* y, int64_t y_stride, int64_t r0,
                          int64_t r1) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) gather_tile_rows<P, V, 4>(w, xt, tokens, y, y_stride, r);
    for (; r < r1; ++r) gather_tile_rows<P, V, 1>(w, xt, tokens, y, y_stride, r);
  }
};

}  // namespace cpullm
