// Decode attention's row kernels, written once over a float vector that each SIMD level supplies
// (`Ops`: __m256 for AVX2, __m512 for AVX-512). Included by attention_rows_avx2.cpp and, after
// its target pragma, by attention_rows_avx512.cpp: everything here is a template over Ops, whose
// types are local to those files, so each level's instantiations stay in its own file and no
// AVX-512 code can reach baseline callers. Nothing from the standard library is used.
//   Ops::kLanes, Ops::Vec            floats per vector, the vector
//   Ops::kLongestRun                 the most vectors of columns `accumulate` sums in one pass
//                                    (twice as many accumulators must fit the registers)
//   zero, add, mul, fma, broadcast(float), load(const float*), store(float*, Vec)
//   values<V>(const std::byte*)      kLanes cache values of type V widened (Q8_0's before scale)
//   eight_sums(const Vec acc[8], float out[8]): out[r] = the sum of acc[r]'s lanes
#pragma once
#include "engine/kernels/attention_rows.hpp"

namespace cpullm {

template <typename Ops>
struct SimdAttentionRows {
  using Vec = typename Ops::Vec;
  static constexpr int64_t kLanes = Ops::kLanes;
  static constexpr int kVectorsPerBlock = static_cast<int>(kQuantBlock / kLanes);  // Q8_0's scale spans these

  template <GgmlType V>
  struct Rows {
    // out columns c0 .. c0 + kLanes kRun - 1 += sum over k < n of coefficients[k] * row k's values
    // there. Even and odd k sum apart, so no FMA chain waits on the previous one's latency. A Q8_0
    // row's block scale joins its coefficient, once a block (a run of several vectors starts a
    // block; a single vector lies within one).
    template <int kRun>
    static void columns(float* out, const float* coefficients, const std::byte* rows, int64_t stride, int64_t n,
                        int64_t c0) {
      Vec even[kRun], odd[kRun];
      for (int v = 0; v < kRun; ++v) even[v] = Ops::load(out + c0 + v * kLanes), odd[v] = Ops::zero();
      const auto add_row = [&](Vec* acc, int64_t k) {
        const std::byte* row = rows + k * stride;
        Vec coefficient = Ops::broadcast(coefficients[k]);
        for (int v = 0; v < kRun; ++v) {
          const int64_t c = c0 + v * kLanes;
          if constexpr (kBlockScaled<V>)
            if (v % kVectorsPerBlock == 0) coefficient = Ops::broadcast(coefficients[k] * q8_0_scale(row, c));
          acc[v] = Ops::fma(coefficient, Ops::template values<V>(row + column_offset<V>(c)), acc[v]);
        }
      };
      int64_t k = 0;
      for (; k + 2 <= n; k += 2) add_row(even, k), add_row(odd, k + 1);
      if (k < n) add_row(even, k);
      for (int v = 0; v < kRun; ++v) Ops::store(out + c0 + v * kLanes, Ops::add(even[v], odd[v]));
    }

    // Columns in runs of kLongestRun vectors (AVX-512: a head of 128 in one pass over the rows),
    // then 4, then single vectors, then one at a time.
    static void accumulate(float* out, const float* coefficients, const std::byte* rows, int64_t stride, int64_t n,
                           int64_t head_dim) {
      constexpr int kLongest = Ops::kLongestRun;
      int64_t c = 0;
      for (; c + kLongest * kLanes <= head_dim; c += kLongest * kLanes)
        columns<kLongest>(out, coefficients, rows, stride, n, c);
      for (; c + 4 * kLanes <= head_dim; c += 4 * kLanes) columns<4>(out, coefficients, rows, stride, n, c);
      for (; c + kLanes <= head_dim; c += kLanes) columns<1>(out, coefficients, rows, stride, n, c);
      for (; c < head_dim; ++c)
        for (int64_t k = 0; k < n; ++k) out[c] += coefficients[k] * value_at<V>(rows + k * stride, c);
    }

    // Eight rows at a time, each with its own accumulator, and the eight reduced together
    // (eight_sums): one dot product per row spent more instructions on reducing its accumulator
    // to a float than on its products (head_dim 64 at AVX2: 8 FMAs, then about 11 reduction
    // steps). A last group of fewer than 8 reads row n - 1 again in the missing places and drops
    // those scores. Q8_0 sums a block's vectors of products first, then adds them times the
    // block's scale.
    static void score(float* scores, const float* q, const std::byte* rows, int64_t stride, int64_t n,
                      int64_t head_dim, float scale) {
      constexpr int64_t kStep = kBlockScaled<V> ? kQuantBlock : kLanes;  // columns sharing a scale
      const int64_t vector_columns = head_dim / kStep * kStep;
      for (int64_t j = 0; j < n; j += 8) {
        const std::byte* row[8];
        for (int64_t r = 0; r < 8; ++r) row[r] = rows + (j + r < n ? j + r : n - 1) * stride;
        Vec acc[8];
        for (Vec& a : acc) a = Ops::zero();
        for (int64_t c = 0; c < vector_columns; c += kStep) {
          if constexpr (kBlockScaled<V>) {
            Vec q_c[kVectorsPerBlock];
            for (int v = 0; v < kVectorsPerBlock; ++v) q_c[v] = Ops::load(q + c + v * kLanes);
            for (int64_t r = 0; r < 8; ++r) {
              Vec block = Ops::mul(q_c[0], Ops::template values<V>(row[r] + column_offset<V>(c)));
              for (int v = 1; v < kVectorsPerBlock; ++v)
                block = Ops::fma(q_c[v], Ops::template values<V>(row[r] + column_offset<V>(c + v * kLanes)), block);
              acc[r] = Ops::fma(block, Ops::broadcast(q8_0_scale(row[r], c)), acc[r]);
            }
          } else {
            const Vec q_c = Ops::load(q + c);
            for (int64_t r = 0; r < 8; ++r)
              acc[r] = Ops::fma(q_c, Ops::template values<V>(row[r] + column_offset<V>(c)), acc[r]);
          }
        }
        alignas(32) float eight[8];
        Ops::eight_sums(acc, eight);
        for (int64_t r = 0; r < 8 && j + r < n; ++r) {
          for (int64_t c = vector_columns; c < head_dim; ++c) eight[r] += q[c] * value_at<V>(row[r], c);
          scores[j + r] = eight[r] * scale;
        }
      }
    }
  };
};

}  // namespace cpullm
